"""One workspace root for a whole bus: ``files`` replicas agree on it, and a session stays bound to
the root its workspace was created under (embedded engine; NATS: ``tests/nats``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.files import WORKSPACE_ROOT, WORKSPACE_SESSIONS
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.runtime.errors import WorkerStartError
from tackroom.runtime.worker import WorkerSpec
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.files.worker import WORKER, FilesConfig

REPLICA = WorkerSpec(
    name="files-replica",
    description="A second files worker: a replica of fs::* in the same process.",
    config_model=FilesConfig,
    start=WORKER.start,
)


def call(session: str, **arguments: Any) -> dict[str, Any]:
    return {**arguments, "_call": {"session_id": session, "function_call_id": "c1"}}


def replicas(first: Path, second: Path, *, url: str = MEMORY_URL) -> Host:
    """Two ``files`` workers serving ``fs::*`` on one engine (calls alternate between them)."""
    config = HarnessConfig(
        schema_version=1,
        worker_config={
            "files": {"workspace_root": str(first)},
            "files-replica": {"workspace_root": str(second)},
        },
    )
    return Host(engine=open_engine(url), workers=[WORKER, REPLICA], config=config)


def single(root: Path, url: str) -> Host:
    config = HarnessConfig(schema_version=1, worker_config={"files": {"workspace_root": str(root)}})
    return Host(engine=open_engine(url), workers=[WORKER], config=config)


async def test_replicas_sharing_a_root_read_what_either_wrote(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    async with replicas(root, root) as host:
        for n in range(20):
            await host.engine.trigger("fs::write", call(f"s{n}", path="a.txt", content=str(n)))
            for _ in range(2):  # replicas take calls of one function id in turn: ask both
                read = await host.engine.trigger("fs::read", call(f"s{n}", path="a.txt"))
                assert read["content"] == str(n)
        record = await WORKSPACE_ROOT.get(host.engine, "current")
    assert record is not None
    assert record.path == str(root.resolve())
    marker = (root / ".tackroom-root").read_text()
    assert record.root_id in marker


async def test_a_replica_with_another_root_refuses_to_start(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "workspaces", tmp_path / "b" / "workspaces"
    with pytest.raises(WorkerStartError) as caught:
        async with replicas(first, second):
            pass
    message = str(caught.value)
    assert caught.value.worker == "files-replica"
    assert str(second.resolve()) in message
    assert str(first.resolve()) in message
    assert "\n" not in message


async def test_a_session_stays_with_the_root_it_was_created_under(tmp_path: Path) -> None:
    url = f"embedded:{tmp_path / 'engine.db'}"
    first, second = tmp_path / "a", tmp_path / "b"
    async with single(first, url) as host:
        await host.engine.trigger("fs::write", call("s1", path="a.txt", content="here"))
        bound = await WORKSPACE_SESSIONS.get(host.engine, "s1")
        assert bound is not None
        assert bound.path == str(first.resolve())

    # Nothing serves fs::* any more: a worker with another root takes the bus over, but the
    # session's files are not there, and saying so beats answering "not found".
    async with single(second, url) as host:
        with pytest.raises(InvocationError) as caught:
            await host.engine.trigger("fs::read", call("s1", path="a.txt"))
        assert caught.value.remote_code == "workspace_elsewhere"
        assert str(first.resolve()) in caught.value.message
        await host.engine.trigger("fs::write", call("s2", path="b.txt", content="new"))
        assert (second / "s2" / "b.txt").read_text() == "new"


async def test_the_same_path_on_another_disk_is_another_root(tmp_path: Path) -> None:
    url = f"embedded:{tmp_path / 'engine.db'}"
    root = tmp_path / "ws"
    async with single(root, url) as host:
        await host.engine.trigger("fs::write", call("s1", path="a.txt", content="here"))
    (root / ".tackroom-root").unlink()  # as if another disk were mounted there
    async with single(root, url) as host:
        with pytest.raises(InvocationError) as caught:
            await host.engine.trigger("fs::read", call("s1", path="a.txt"))
        assert caught.value.remote_code == "workspace_elsewhere"


async def test_a_session_id_cannot_name_the_marker(tmp_path: Path) -> None:
    async with single(tmp_path / "ws", MEMORY_URL) as host:
        engine: Engine = host.engine
        with pytest.raises(InvocationError) as caught:
            await engine.trigger("fs::list", call(".tackroom-root"))
        assert caught.value.remote_code == "no_call_context"
