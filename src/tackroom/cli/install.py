"""``tackroom worker add SPEC`` and ``tackroom worker remove NAME``: worker packages in a project.

``add`` installs a pip requirement (into this Python) or an npm package (``--npm``, into
``.tackroom/npm`` beside ``tackroom.yaml``), finds the worker it brings (a ``tackroom.workers``
entry point; an npm package's ``"tackroom": {"worker": NAME, "contracts": {...}}``), checks the
contract versions it declares against this tackroom's, and records it under
``installed_workers:`` in ``tackroom.yaml``. A worker written against other contract versions is
uninstalled again and refused in one line. ``remove`` uninstalls it and drops the record.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tackroom.runtime.errors import ConfigError
from tackroom.runtime.installed import InstalledWorker

__all__ = ["add_worker_parsers"]

_PROBE = """
import json, sys
from importlib.metadata import entry_points
from tackroom.runtime.worker import WorkerSpec, version_of
found = {}
for point in entry_points(group="tackroom.workers"):
    if point.dist is None or point.dist.name == "tackroom":
        continue
    try:
        spec = point.load()
    except Exception as exc:
        found[point.name] = {"error": f"{type(exc).__name__}: {exc}", "package": point.dist.name}
        continue
    if not isinstance(spec, WorkerSpec):
        found[point.name] = {"error": "not a WorkerSpec", "package": point.dist.name}
        continue
    found[point.name] = {
        "package": point.dist.name,
        "version": version_of(spec),
        "contracts": dict(spec.contracts),
    }
json.dump(found, sys.stdout)
"""


class InstallError(Exception):
    """One line for the person at the terminal; exit status 2."""


def add_worker_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add = sub.add_parser("add", help="install a worker package and record it in tackroom.yaml")
    add.add_argument("spec", help="a pip requirement, wheel or directory; with --npm an npm spec")
    add.add_argument("--npm", action="store_true", help="an npm package (run with node)")
    add.add_argument(
        "--replaces",
        action="append",
        default=[],
        metavar="BUILTIN",
        help="a built-in worker it takes the place of (repeatable)",
    )
    add.add_argument("--config", type=Path, default=Path("tackroom.yaml"), help="tackroom.yaml")
    add.set_defaults(run=_run_add)
    remove = sub.add_parser("remove", help="uninstall a worker `worker add` installed")
    remove.add_argument("name", help="the worker's name (as `installed_workers:` lists it)")
    remove.add_argument("--config", type=Path, default=Path("tackroom.yaml"), help="tackroom.yaml")
    remove.set_defaults(run=_run_remove)


def _run_add(args: argparse.Namespace) -> int:
    try:
        installed = _installed(args.config)
        name, worker = (_add_npm if args.npm else _add_pip)(args.spec, args.config)
        worker = worker.model_copy(update={"replaces": _replaces(args.replaces, name)})
        if name in installed and installed[name].package != worker.package:
            raise InstallError(f"a worker named {name!r} is installed from {installed[name].spec}")
        _write_installed(args.config, {**installed, name: worker})
    except (InstallError, ConfigError) as exc:
        print(f"tackroom worker add: {exc}", file=sys.stderr)
        return 2
    print(f"installed worker {name} {worker.version} ({worker.source}: {worker.package})")
    return 0


def _run_remove(args: argparse.Namespace) -> int:
    try:
        installed = _installed(args.config)
        worker = installed.get(args.name)
        if worker is None:
            known = ", ".join(sorted(installed)) or "none"
            raise InstallError(f"no installed worker {args.name!r} (installed: {known})")
        if worker.source == "pip":
            _run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", worker.package], "pip")
        else:
            _npm(["uninstall", worker.package], _npm_root(args.config))
        _write_installed(args.config, {k: v for k, v in installed.items() if k != args.name})
    except (InstallError, ConfigError) as exc:
        print(f"tackroom worker remove: {exc}", file=sys.stderr)
        return 2
    print(f"removed worker {args.name} ({worker.package})")
    return 0


# -- pip -------------------------------------------------------------------------------------


def _add_pip(spec: str, config: Path) -> tuple[str, InstalledWorker]:
    before = _probe()
    _run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", spec], "pip")
    after = _probe()
    new = {name: info for name, info in after.items() if before.get(name) != info}
    if not new:
        raise InstallError(
            f"{spec} brought no new tackroom worker (no new `tackroom.workers` entry point);"
            " is it installed already?"
        )
    if len(new) > 1:
        raise InstallError(f"{spec} brings {len(new)} workers ({', '.join(sorted(new))}): add one")
    name, info = next(iter(new.items()))
    package = str(info["package"])
    undo = [sys.executable, "-m", "pip", "uninstall", "-y", "-q", package]
    if "error" in info:
        _run(undo, "pip")
        raise InstallError(f"worker {name} from {package} does not load: {info['error']}")
    _check_contracts(
        name, str(info["version"]), dict(info["contracts"]), undo=lambda: _run(undo, "pip")
    )
    return name, InstalledWorker(
        source="pip",
        spec=spec,
        package=package,
        version=str(info["version"]),
        contracts=dict(info["contracts"]),
    )


def _probe() -> dict[str, dict[str, Any]]:
    """The installed third-party workers, read in a fresh interpreter (no stale import caches)."""
    out = _run([sys.executable, "-c", _PROBE], "python")
    found: dict[str, dict[str, Any]] = json.loads(out)
    return found


# -- npm -------------------------------------------------------------------------------------


def _npm_root(config: Path) -> Path:
    return config.resolve().parent / ".tackroom" / "npm"


def _npm(arguments: list[str], root: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / "package.json"
    if not manifest.exists():
        manifest.write_text('{"private": true}\n', encoding="utf-8")
    command = ["npm", *arguments, "--prefix", str(root), "--no-audit", "--no-fund"]
    return _run([*command, "--loglevel=error"], "npm")


def _add_npm(spec: str, config: Path) -> tuple[str, InstalledWorker]:
    root = _npm_root(config)
    before = _dependencies(root)
    target = str(Path(spec).resolve()) if Path(spec).is_dir() else spec
    _npm(["install", target], root)
    added = sorted(set(_dependencies(root)) - set(before))
    if len(added) != 1:
        raise InstallError(f"{spec} is installed already, or brought {len(added)} packages")
    package = added[0]

    def undo() -> None:
        _npm(["uninstall", package], root)

    manifest_path = root / "node_modules" / package / "package.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    declared = manifest.get("tackroom")
    if not isinstance(declared, dict) or not isinstance(declared.get("worker"), str):
        undo()
        raise InstallError(
            f"{package} declares no tackroom worker: its package.json needs"
            ' "tackroom": {"worker": NAME, "contracts": {...}}'
        )
    name = declared["worker"]
    contracts = declared.get("contracts") or {}
    entry = declared.get("main") or manifest.get("main") or "index.js"
    version = str(manifest.get("version") or "")
    if not isinstance(contracts, dict) or not all(isinstance(v, int) for v in contracts.values()):
        undo()
        raise InstallError(f"{package}: tackroom.contracts must map function ids to integers")
    _check_contracts(name, version, contracts, undo=undo)
    command = ["node", str((manifest_path.parent / str(entry)).resolve())]
    return name, InstalledWorker(
        source="npm",
        spec=spec,
        package=package,
        version=version,
        contracts=contracts,
        command=command,
    )


def _dependencies(root: Path) -> dict[str, str]:
    manifest = root / "package.json"
    if not manifest.exists():
        return {}
    deps = json.loads(manifest.read_text(encoding="utf-8")).get("dependencies") or {}
    return dict(deps)


# -- shared ----------------------------------------------------------------------------------


def _check_contracts(
    name: str, version: str, declared: dict[str, int], *, undo: Callable[[], object]
) -> None:
    """Refuse (after ``undo()``) a worker that declares a contract at another version."""
    from tackroom.cli.schema import contract_versions

    ours = contract_versions()
    for function_id, theirs in sorted(declared.items()):
        current = ours.get(function_id)
        if current is not None and current != theirs:
            undo()
            raise InstallError(
                f"{name} {version} serves {function_id} at contract version {theirs}, this"
                f" tackroom speaks version {current}: not installed (install a {name} built for"
                f" version {current}, or a tackroom that speaks {theirs})"
            )


def _replaces(names: list[str], worker: str) -> list[str]:
    from tackroom.runtime.registry import is_builtin

    for name in names:
        if not is_builtin(name):
            raise InstallError(f"--replaces {name}: not a built-in worker")
        if name == worker:
            raise InstallError(f"--replaces {name}: a worker cannot replace itself")
    return list(dict.fromkeys(names))


def _run(command: list[str], tool: str) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise InstallError(f"{tool} is not installed (needed to run {command[0]})") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise InstallError(f"{tool} failed: {lines[-1] if lines else f'exit {done.returncode}'}")
    return done.stdout


def _installed(config: Path) -> dict[str, InstalledWorker]:
    from tackroom.runtime.config import load_config

    if not config.exists():
        config.write_text("schema_version: 1\n", encoding="utf-8")
    return dict(load_config(config).installed_workers)


def _write_installed(config: Path, installed: dict[str, InstalledWorker]) -> None:
    """Rewrite only the top-level ``installed_workers:`` block (the rest keeps its comments)."""
    import yaml

    from tackroom.runtime.config import load_config

    original = config.read_text(encoding="utf-8")
    kept: list[str] = []
    inside = False
    for line in original.splitlines(keepends=True):
        if line.startswith("installed_workers:"):
            inside = True
            continue
        if inside and (not line.strip() or line[0] in " \t"):
            continue
        inside = False
        kept.append(line)
    text = "".join(kept)
    if installed:
        block = {
            "installed_workers": {
                name: worker.model_dump(mode="json", exclude_defaults=True)
                | {"schema_version": worker.schema_version, "source": worker.source}
                for name, worker in sorted(installed.items())
            }
        }
        text = text.rstrip("\n") + "\n" + yaml.safe_dump(block, sort_keys=True)
    config.write_text(text, encoding="utf-8")
    try:
        load_config(config)
    except ConfigError:
        config.write_text(original, encoding="utf-8")
        raise
