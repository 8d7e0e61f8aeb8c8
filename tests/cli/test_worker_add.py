"""``tackroom worker add`` / ``remove``: a local pip wheel and a local npm package, end to end.

The pip case installs into this test's own Python and uninstalls at the end; the npm case
installs under the project's ``.tackroom/npm`` and boots the worker as a node process on NATS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tackroom.runtime.config import load_config
from tackroom.runtime.host import Host
from tackroom.runtime.installed import InstalledWorker, boot_list
from tackroom.runtime.registry import available_workers
from tackroom.testing.backends import engine_url_for

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "typescript"
TACKROOM = [sys.executable, "-m", "tackroom.cli.main"]

WORKER_MODULE = """
from tackroom.runtime.worker import WorkerConfig, WorkerSpec


async def _start(ctx):
    async def hello(payload):
        return {{"greeting": "hello " + str((payload or {{}}).get("name", "?"))}}

    await ctx.register_function("tool::{tool}", hello, description="Say hello.")


WORKER = WorkerSpec(
    name="{name}",
    description="says hello",
    config_model=WorkerConfig,
    start=_start,
    contracts={contracts!r},
)
"""


def _wheel(directory: Path, *, dist: str, name: str, contracts: dict[str, int]) -> Path:
    """A pure-Python wheel with one worker module and its entry point (no build step)."""
    module = dist.replace("-", "_")
    info = f"{module}-1.2.3.dist-info"
    files = {
        f"{module}.py": WORKER_MODULE.format(tool=module, name=name, contracts=contracts),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{info}/entry_points.txt": f"[tackroom.workers]\n{name} = {module}:WORKER\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    path = directory / f"{module}-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def _tackroom(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [*TACKROOM, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=180
    )


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "tackroom.yaml").write_text("schema_version: 1\n# my project\n")
    yield tmp_path
    for dist in ("tackroom-hello-worker", "tackroom-future-worker"):
        subprocess.run(
            [sys.executable, "-m", "pip", "uninstall", "-y", "-q", dist],
            capture_output=True,
            check=False,
        )


async def test_a_pip_worker_is_added_booted_with_its_version_and_removed(project: Path) -> None:
    assert "hello" not in available_workers()  # read before the install, as a live process has
    wheel = _wheel(project, dist="tackroom-hello-worker", name="hello", contracts={"tool::x": 1})
    added = _tackroom("worker", "add", str(wheel), "--replaces", "utilities", cwd=project)
    assert added.returncode == 0, added.stderr
    assert "installed worker hello 1.2.3" in added.stdout
    text = (project / "tackroom.yaml").read_text()
    assert "# my project" in text  # the rest of the file is kept
    record = yaml.safe_load(text)["installed_workers"]["hello"]
    assert record["package"] == "tackroom-hello-worker"
    assert record["version"] == "1.2.3"
    assert record["replaces"] == ["utilities"]

    config = load_config(project / "tackroom.yaml")
    assert boot_list(["engine", "utilities"], config.installed_workers) == ["engine", "hello"]
    host = Host.from_config(config, workers=["engine", "utilities"])
    async with host:
        workers = {w.name: w for w in await host.engine.list_workers()}
        assert "utilities" not in workers  # replaced, as the record says
        assert workers["hello"].version == "1.2.3"
        reply = await host.engine.trigger("tool::tackroom_hello_worker", {"name": "Ada"})
        assert reply == {"greeting": "hello Ada"}

    with (project / "tackroom.yaml").open("a") as file:
        file.write("# a note of the user's after the block\n")
    removed = _tackroom("worker", "remove", "hello", cwd=project)
    assert removed.returncode == 0, removed.stderr
    left = (project / "tackroom.yaml").read_text()
    assert "installed_workers" not in left
    assert "# a note of the user's after the block" in left
    assert not _pip_has("tackroom-hello-worker")  # uninstalled


def _pip_has(dist: str) -> bool:
    shown = subprocess.run([sys.executable, "-m", "pip", "show", dist], capture_output=True)
    return shown.returncode == 0


def test_a_pip_worker_of_another_contract_version_is_refused_in_one_line(
    project: Path,
) -> None:
    wheel = _wheel(
        project,
        dist="tackroom-future-worker",
        name="future",
        contracts={"policy::check_permissions": 99},
    )
    added = _tackroom("worker", "add", str(wheel), cwd=project)
    assert added.returncode == 2
    lines = added.stderr.strip().splitlines()
    assert len(lines) == 1, added.stderr
    assert "policy::check_permissions at contract version 99" in lines[0]
    assert "speaks version 1" in lines[0]
    assert "Traceback" not in added.stderr
    assert "installed_workers" not in (project / "tackroom.yaml").read_text()
    assert not _pip_has("tackroom-future-worker")  # uninstalled again


def test_removing_what_is_not_installed_says_so(project: Path) -> None:
    removed = _tackroom("worker", "remove", "nobody", cwd=project)
    assert removed.returncode == 2
    assert removed.stderr.strip() == (
        "tackroom worker remove: no installed worker 'nobody' (installed: none)"
    )


def test_replaces_swaps_the_builtin_once() -> None:
    installed = {
        "mine": InstalledWorker(source="pip", spec="mine", package="mine", replaces=["policy"])
    }
    assert boot_list(["engine", "policy", "mine", "approvals"], installed) == [
        "engine",
        "mine",
        "approvals",
    ]


# -- npm -------------------------------------------------------------------------------------

NODE_WORKER = """
import {{ connect }} from "{sdk}";
const worker = await connect({{
  url: process.env.TACKROOM_ENGINE, worker: "ts-hello", version: "2.0.1",
}});
await worker.registerFunction("tool::ts_hello", (p) => ({{ greeting: `hello ${{p.name}}` }}), {{
  description: "Say hello (TypeScript).",
  contractVersion: 1,
}});
console.log("ready: tool::ts_hello");
process.once("SIGTERM", () => worker.close().then(() => process.exit(0)));
"""


def _npm_package(directory: Path, *, contracts: dict[str, int]) -> Path:
    package = directory / "ts-hello-worker"
    package.mkdir()
    manifest = {
        "name": "ts-hello-worker",
        "version": "2.0.1",
        "type": "module",
        "main": "worker.js",
        "tackroom": {"worker": "ts-hello", "contracts": contracts},
    }
    (package / "package.json").write_text(json.dumps(manifest))
    index = SDK / "dist" / "src" / "index.js"
    (package / "worker.js").write_text(NODE_WORKER.format(sdk=index.as_uri()))
    return package


needs_node = pytest.mark.skipif(
    shutil.which("node") is None
    or shutil.which("npm") is None
    or not (SDK / "dist" / "src" / "index.js").exists(),
    reason="node, npm or the built TypeScript SDK is missing (make setup builds it)",
)


@needs_node
async def test_an_npm_worker_is_added_and_booted_as_a_node_process(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "tackroom.yaml").write_text("schema_version: 1\n")
    package = _npm_package(tmp_path, contracts={"policy::check_permissions": 1})
    added = _tackroom("worker", "add", "--npm", str(package), cwd=project)
    assert added.returncode == 0, added.stderr
    record = yaml.safe_load((project / "tackroom.yaml").read_text())["installed_workers"]
    assert record["ts-hello"]["command"][0] == "node"
    assert record["ts-hello"]["version"] == "2.0.1"

    config = load_config(project / "tackroom.yaml")
    url = engine_url_for("nats", tmp_path)
    host = Host.from_config(config, workers=["engine", "ts-hello"], engine_url=url)
    async with host:
        reply = await host.engine.trigger("tool::ts_hello", {"name": "Ada"})
        assert reply == {"greeting": "hello Ada"}
        ts = [w for w in await host.engine.list_workers() if w.name == "ts-hello"]
        assert ts
        assert ts[0].version == "2.0.1"
        assert ts[0].contracts == {"tool::ts_hello": 1}

    removed = _tackroom("worker", "remove", "ts-hello", cwd=project)
    assert removed.returncode == 0, removed.stderr
    assert not (project / ".tackroom" / "npm" / "node_modules" / "ts-hello-worker").exists()


@needs_node
def test_an_npm_worker_of_another_contract_version_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "tackroom.yaml").write_text("schema_version: 1\n")
    package = _npm_package(tmp_path, contracts={"policy::check_permissions": 7})
    added = _tackroom("worker", "add", "--npm", str(package), cwd=project)
    assert added.returncode == 2
    assert len(added.stderr.strip().splitlines()) == 1, added.stderr
    assert "contract version 7" in added.stderr
    assert not (project / ".tackroom" / "npm" / "node_modules" / "ts-hello-worker").exists()


def test_an_npm_worker_on_the_embedded_engine_is_one_readable_line(tmp_path: Path) -> None:
    (tmp_path / "tackroom.yaml").write_text(
        "schema_version: 1\ninstalled_workers:\n  ts-hello:\n    source: npm\n    spec: ./x\n"
        "    package: x\n    command: [node, /nonexistent.js]\n"
    )
    (tmp_path / "script.json").write_text('{"schema_version": 1, "turns": [{"text": "hi"}]}')
    ran = _tackroom(
        "run", "hello", "--model", "scripted:x", "--script", "script.json", cwd=tmp_path
    )
    assert ran.returncode == 2
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert "worker 'ts-hello' failed to start" in lines[0]
    assert "joins the bus over NATS: set engine: nats://" in lines[0]
