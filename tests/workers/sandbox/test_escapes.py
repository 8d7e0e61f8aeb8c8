"""The escape suite: real bubblewrap runs, each trying to get out, each refused.

Reading ``/etc/shadow``, the user's home or the project; writing outside the workspace; symlinks
planted in the workspace; ``..`` and absolute working folders; the network; fork bombs and
memory hogs; a sleep past the timeout; a provider key in the worker's environment.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tackroom.engine import Engine
from tackroom.testing import wait_until

from .conftest import processes_with, refused, requires_bwrap, run, sandbox_bus, sh

pytestmark = requires_bwrap

MAX_PROCESSES = 24
LIMITS = {
    "max_processes": MAX_PROCESSES,
    "memory_mb": 256,
    "cpu_seconds": 20,
    "tmp_mb": 8,
    "default_timeout": 20,
}
SECRET = "sk-tackroom-escape-suite-0123456789"
PROJECT = Path(__file__).resolve().parents[3]


@pytest.fixture
async def bus(root: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Engine]:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    async with sandbox_bus(root, **LIMITS) as engine:
        assert (await engine.trigger("sandbox::status", {}))["level"] == "bwrap"
        yield engine


def workspace(root: Path, session: str = "s1") -> Path:
    return root / session


# -- reading ------------------------------------------------------------------------------------
async def test_etc_shadow_is_not_there(bus: Engine) -> None:
    result = await sh(bus, "cat /etc/shadow; cat /etc/gshadow; ls /etc; cat /etc/passwd")
    assert "/etc/shadow: No such file or directory" in result["stderr"]
    assert "/etc/gshadow: No such file or directory" in result["stderr"]
    listed, passwd = result["stdout"].split("root:x:0:0", 1)
    assert "shadow" not in listed
    assert "pip.conf" not in listed  # registry credentials stay out
    assert "npmrc" not in listed
    assert "sandbox:x:1000:1000" in passwd  # the sandbox's own passwd, not the host's


async def test_the_users_home_the_project_and_the_venv_are_not_there(bus: Engine) -> None:
    paths = [Path.home(), Path("/home"), PROJECT, Path(sys.executable)]
    result = await sh(bus, " ; ".join(f"ls -d '{path}'" for path in paths) + "; echo $HOME")
    for path in paths:
        assert f"'{path}': No such file or directory" in result["stderr"]
    assert result["stdout"] == "/workspace\n"


# -- writing ------------------------------------------------------------------------------------
async def test_nothing_outside_the_workspace_is_writable(bus: Engine, root: Path) -> None:
    other = workspace(root, "other")
    other.mkdir(parents=True)
    marker = f"escape-{uuid.uuid4().hex}"
    targets = ["/usr/x", "/x", "/etc/x", "/proc/x", "/dev/x", "/workspace/../other/x"]
    command = "; ".join(f"echo pwned > {target}" for target in targets)
    result = await sh(bus, f"{command}; echo inside > /tmp/{marker} && echo ok > kept.txt")
    for target in targets:
        assert target in result["stderr"]  # each write failed, saying where
    assert result["stderr"].count("Read-only file system") >= 4
    assert (workspace(root) / "kept.txt").read_text() == "ok\n"
    assert marker not in os.listdir("/tmp")  # the sandbox's /tmp is its own
    assert os.listdir(other) == []
    assert sorted(os.listdir(root)) == ["other", "s1"]


async def test_private_tmp_is_size_capped(bus: Engine) -> None:
    result = await sh(bus, "for i in 1 2 3; do head -c 4000000 /dev/zero > /tmp/$i || exit 9; done")
    assert result["exit_code"] == 9
    assert "No space left on device" in result["stderr"]


async def test_symlinks_planted_in_the_workspace_lead_nowhere(bus: Engine, root: Path) -> None:
    other = workspace(root, "other")
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("other session's secret")
    await sh(bus, "true")  # creates the workspace
    mine = workspace(root)
    (mine / "shadow").symlink_to("/etc/shadow")
    (mine / "home").symlink_to(Path.home())
    (mine / "up").symlink_to("..")
    (mine / "other").symlink_to(other)
    result = await sh(
        bus,
        "cat shadow; ls home/; cat other/secret.txt; echo pwned > other/pwned;"
        " ls up/; cat up/other/secret.txt",
    )
    assert "other session's secret" not in result["stdout"]
    assert "root:" not in result["stdout"]
    assert "s1" not in result["stdout"].split()  # up/ is the sandbox's root, not the host's
    assert os.listdir(other) == ["secret.txt"]
    for cwd in ("up", "other", "home", "up/other"):
        message = await refused(bus, {"argv": ["true"], "cwd": cwd}, "path_outside_workspace")
        assert "symlink" in message


@pytest.mark.parametrize("cwd", ["..", "../other", "a/../..", "/", "/etc", "/workspace"])
async def test_dotdot_and_absolute_working_folders_are_refused(bus: Engine, cwd: str) -> None:
    await refused(bus, {"argv": ["true"], "cwd": cwd}, "path_outside_workspace")


# -- network ------------------------------------------------------------------------------------
async def test_no_network(bus: Engine) -> None:
    connections: list[str] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append("seen")
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    probe = (
        "import socket\n"
        f"for host, port in [('127.0.0.1', {port}), ('1.1.1.1', 53), ('8.8.8.8', 443)]:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2).close()\n"
        "        print('connected', host)\n"
        "    except OSError as exc:\n"
        "        print('refused', host, exc.errno)\n"
    )
    try:
        result = await run(bus, ["python3", "-c", probe])
    finally:
        server.close()
        await server.wait_closed()
    assert "connected" not in result["stdout"], result
    assert result["stdout"].count("refused") == 3
    assert connections == []


# -- limits -------------------------------------------------------------------------------------
async def test_process_count_is_capped(bus: Engine) -> None:
    count = (
        "import os, time\n"
        "started = 0\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        started += 1\n"
        "    except OSError:\n"
        "        break\n"
        "print(started)\n"
    )
    result = await run(bus, ["python3", "-c", count])
    assert result["exit_code"] == 0, result
    assert 0 < int(result["stdout"]) < MAX_PROCESSES


async def test_a_fork_bomb_is_contained_and_killed_at_the_timeout(bus: Engine) -> None:
    marker = f"bomb{uuid.uuid4().hex}"
    bomb = (
        f"# {marker}: every process forks for ever\n"
        "import os, time\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        time.sleep(0.01)\n"
    )
    peak = 0
    running = True

    async def watch() -> None:
        nonlocal peak
        while running:
            peak = max(peak, len(processes_with(marker)))
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    try:
        result = await run(bus, ["python3", "-c", bomb], timeout_seconds=2)
    finally:
        running = False
        await watcher
    assert result["timed_out"] is True
    assert result["killed_reason"] == "timeout"
    assert peak > 2, "the bomb did not run"
    assert peak <= MAX_PROCESSES + 1  # the sandbox's processes, and bwrap's own outside
    await wait_until(lambda: not processes_with(marker), message="the bomb outlived its call")


async def test_a_memory_hog_fails_within_its_limit(bus: Engine) -> None:
    hogs = [
        "x = bytearray(1 << 30)",
        "chunks = []\nwhile True:\n    chunks.append(b'x' * (16 << 20))",
    ]
    for hog in hogs:
        result = await run(bus, ["python3", "-c", hog])
        assert result["exit_code"] == 1, result
        assert "MemoryError" in result["stderr"]
        assert result["timed_out"] is False


async def test_a_sleep_past_the_timeout_is_killed_with_its_group(bus: Engine) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**6}"
    result = await sh(
        bus, f"sleep {marker} & (sleep {marker} &) ; echo started; sleep {marker}",
        timeout_seconds=1,
    )  # fmt: skip
    assert result["timed_out"] is True
    assert result["killed_reason"] == "timeout"
    assert result["stdout"] == "started\n"  # what it printed before it was killed
    assert (result["exit_code"], result["signal"]) == (137, 9)
    assert result["duration_ms"] >= 1000
    await wait_until(lambda: not processes_with(f"sleep\0{marker}"), message="a sleep survived")


# -- environment --------------------------------------------------------------------------------
async def test_provider_keys_in_the_workers_environment_are_absent(bus: Engine) -> None:
    result = await sh(
        bus,
        "env; cat /proc/self/environ /proc/1/environ /proc/1/cmdline 2>&1;"
        " ls /proc | grep -E '^[0-9]+$' | while read p; do cat /proc/$p/environ 2>/dev/null; done",
    )
    everything = result["stdout"] + result["stderr"]
    assert SECRET not in everything
    assert "OPENAI_API_KEY" not in everything
    assert "ANTHROPIC_API_KEY" not in everything
    assert "HOME=/workspace" in result["stdout"]
