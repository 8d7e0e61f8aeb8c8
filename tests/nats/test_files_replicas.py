"""``files`` replicas in separate processes on one NATS bus: one workspace root, or a refusal."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import InvocationError
from tackroom.testing import running_engine
from tackroom.testing.cli import tackroom_argv

STARTUP = 30.0


def workdir(tmp_path: Path, name: str, *, workspace_root: Path | None = None) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    config = "schema_version: 1\n"
    if workspace_root is not None:
        config += f"worker_config:\n  files:\n    workspace_root: {workspace_root}\n"
    (directory / "tackroom.yaml").write_text(config)
    return directory


@asynccontextmanager
async def files_worker(url: str, cwd: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``tackroom worker run files`` in ``cwd``, started (its ready line read); SIGTERM after."""
    proc = await _spawn(url, cwd)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), STARTUP)).decode()
        if not line.startswith("tackroom ready"):
            assert proc.stderr is not None
            error = (await asyncio.wait_for(proc.stderr.read(), STARTUP)).decode()
            pytest.fail(f"the files worker in {cwd} did not start: {error}")
        yield proc
    finally:
        await _stop(proc)


async def _spawn(url: str, cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *tackroom_argv("worker", "run", "files", "--engine", url),
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STARTUP)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def call(session: str, **arguments: Any) -> dict[str, Any]:
    return {**arguments, "_call": {"session_id": session, "function_call_id": "c1"}}


async def test_two_processes_with_one_configured_root_read_each_others_writes(
    tmp_path: Path, nats_url: str
) -> None:
    shared = tmp_path / "shared-workspaces"
    first = workdir(tmp_path, "a", workspace_root=shared)
    second = workdir(tmp_path, "b", workspace_root=shared)
    async with (
        files_worker(nats_url, first),
        files_worker(nats_url, second),
        running_engine(nats_url) as engine,
    ):
        for n in range(20):
            await engine.trigger("fs::write", call(f"s{n}", path="a.txt", content=str(n)))
            for _ in range(2):
                read = await engine.trigger("fs::read", call(f"s{n}", path="a.txt"), timeout=10)
                assert read["content"] == str(n)


async def test_a_process_with_another_root_refuses_to_start(tmp_path: Path, nats_url: str) -> None:
    first, second = workdir(tmp_path, "a"), workdir(tmp_path, "b")
    async with files_worker(nats_url, first):
        proc = await _spawn(nats_url, second)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), STARTUP)
        finally:
            await _stop(proc)
    assert proc.returncode == 1, out.decode()
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("tackroom: error: worker 'files' failed to start:")
    assert str((first / ".tackroom" / "workspaces").resolve()) in lines[0]
    assert str((second / ".tackroom" / "workspaces").resolve()) in lines[0]


async def test_a_session_is_not_silently_read_from_another_root(
    tmp_path: Path, nats_url: str
) -> None:
    first, second = workdir(tmp_path, "a"), workdir(tmp_path, "b")
    async with running_engine(nats_url) as engine:
        async with files_worker(nats_url, first):
            await engine.trigger("fs::write", call("s1", path="a.txt", content="here"))
        # The first process stopped cleanly, so the bus has no files worker: the second takes
        # the bus over with its own root, and refuses the session whose files are elsewhere.
        async with files_worker(nats_url, second):
            with pytest.raises(InvocationError) as caught:
                await engine.trigger("fs::read", call("s1", path="a.txt"), timeout=10)
            assert caught.value.remote_code == "workspace_elsewhere", caught.value
            await engine.trigger("fs::write", call("s2", path="b.txt", content="new"))
    assert (second / ".tackroom" / "workspaces" / "s2" / "b.txt").read_text() == "new"
