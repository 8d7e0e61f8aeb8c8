"""The ``files`` worker: read, write, list in a per-session workspace that paths cannot escape."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.tools import traits_of
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.files.worker import WORKER
from tackroom.workers.files.workspace import _open_dir


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "workspaces"


@pytest.fixture
async def engine(root: Path) -> AsyncIterator[Engine]:
    config = HarnessConfig(
        schema_version=1,
        worker_config={
            "files": {
                "workspace_root": str(root),
                "max_read_bytes": 64,
                "max_write_bytes": 128,
                "max_list_entries": 5,
            }
        },
    )
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=config) as host:
        yield host.engine


def call(session: str = "s1", **arguments: Any) -> dict[str, Any]:
    return {**arguments, "_call": {"session_id": session, "function_call_id": "c1"}}


async def fails(engine: Engine, function_id: str, payload: Any, code: str) -> str:
    with pytest.raises(InvocationError) as caught:
        await engine.trigger(function_id, payload)
    assert caught.value.remote_code == code, caught.value
    return caught.value.message


async def test_write_read_list(engine: Engine, root: Path) -> None:
    written = await engine.trigger("fs::write", call(path="notes/todo.md", content="héllo\n"))
    assert written == {"schema_version": 1, "bytes_written": 7}
    read = await engine.trigger("fs::read", call(path="notes/todo.md"))
    assert read == {"schema_version": 1, "content": "héllo\n"}
    await engine.trigger("fs::write", call(path="a.txt", content="abc"))
    listing = await engine.trigger("fs::list", call())
    assert listing == {
        "schema_version": 1,
        "entries": [
            {"name": "a.txt", "type": "file", "size": 3},
            {"name": "notes", "type": "directory", "size": 0},
        ],
        "truncated": False,
    }
    sub = await engine.trigger("fs::list", call(path="notes"))
    assert sub["entries"] == [{"name": "todo.md", "type": "file", "size": 7}]
    assert (root / "s1" / "notes" / "todo.md").read_text() == "héllo\n"
    for directory in (root, root / "s1", root / "s1" / "notes"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


async def test_overwrite_replaces_the_whole_file(engine: Engine, root: Path) -> None:
    await engine.trigger("fs::write", call(path="a.txt", content="long content"))
    await engine.trigger("fs::write", call(path="a.txt", content="short"))
    assert (await engine.trigger("fs::read", call(path="a.txt")))["content"] == "short"
    assert sorted(os.listdir(root / "s1")) == ["a.txt"]  # no temporary file left


async def test_sessions_are_isolated(engine: Engine) -> None:
    await engine.trigger("fs::write", call("alice", path="secret.txt", content="x"))
    await fails(engine, "fs::read", call("bob", path="secret.txt"), "not_found")
    assert (await engine.trigger("fs::list", call("bob")))["entries"] == []


@pytest.mark.parametrize("path", ["../x", "a/../../x", "..", "/etc/passwd", "/tmp"])
async def test_escapes_are_rejected(engine: Engine, root: Path, path: str) -> None:
    for function_id, payload in [
        ("fs::read", call(path=path)),
        ("fs::write", call(path=path, content="pwned")),
        ("fs::list", call(path=path)),
    ]:
        await fails(engine, function_id, payload, "path_outside_workspace")
    assert not (root / "x").exists()
    assert not (root.parent / "x").exists()


async def test_symlinks_out_are_rejected(engine: Engine, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    await engine.trigger("fs::list", call())  # creates the workspace
    workspace = root / "s1"
    (workspace / "out").symlink_to(outside)
    (workspace / "secret-link").symlink_to(outside / "secret.txt")
    for function_id, payload in [
        ("fs::read", call(path="out/secret.txt")),
        ("fs::read", call(path="secret-link")),
        ("fs::write", call(path="out/new.txt", content="x")),
        ("fs::write", call(path="secret-link", content="x")),
        ("fs::list", call(path="out")),
    ]:
        message = await fails(engine, function_id, payload, "path_outside_workspace")
        assert "symlink" in message
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"
    listing = await engine.trigger("fs::list", call())
    assert {e["name"]: e["type"] for e in listing["entries"]} == {
        "out": "symlink",
        "secret-link": "symlink",
    }


async def test_symlinks_inside_are_followed(engine: Engine, root: Path) -> None:
    await engine.trigger("fs::write", call(path="real/file.txt", content="inside"))
    (root / "s1" / "alias").symlink_to("real")
    assert (await engine.trigger("fs::read", call(path="alias/file.txt")))["content"] == "inside"


def test_a_symlink_swapped_in_after_the_check_is_not_followed(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    base.mkdir()
    (base / "link").symlink_to(tmp_path)
    with pytest.raises(OSError, match=r"symbolic links|Not a directory") as caught:
        _open_dir(base, ("link",), create=False)
    assert caught.value.errno in {errno.ELOOP, errno.ENOTDIR}


async def test_a_session_dir_that_is_a_symlink_is_rejected(
    engine: Engine, root: Path, tmp_path: Path
) -> None:
    os.makedirs(root, exist_ok=True)
    (root / "evil").symlink_to(tmp_path)
    await fails(engine, "fs::list", call("evil"), "path_outside_workspace")


@pytest.mark.parametrize("payload", [{"path": "a.txt"}, None])
async def test_no_call_context(engine: Engine, payload: Any) -> None:
    message = await fails(engine, "fs::list", payload, "no_call_context")
    assert "_call" in message


@pytest.mark.parametrize("session", ["..", "a/b", "."])
async def test_unusable_session_ids(engine: Engine, session: str) -> None:
    await fails(engine, "fs::list", call(session), "no_call_context")


async def test_typed_errors(engine: Engine, root: Path) -> None:
    await fails(engine, "fs::read", call(path="missing.txt"), "not_found")
    await fails(engine, "fs::list", call(path="missing"), "not_found")
    await engine.trigger("fs::write", call(path="dir/f.txt", content="x"))
    await fails(engine, "fs::read", call(path="dir"), "is_a_directory")
    await fails(engine, "fs::read", call(path="."), "is_a_directory")
    await fails(engine, "fs::write", call(path="dir", content="x"), "is_a_directory")
    await fails(engine, "fs::list", call(path="dir/f.txt"), "not_a_directory")
    await fails(engine, "fs::read", call(path="dir/f.txt/x"), "not_a_directory")
    await fails(engine, "fs::write", call(path="big.txt", content="x" * 129), "too_large")
    await engine.trigger("fs::write", call(path="edge.txt", content="x" * 65))
    await fails(engine, "fs::read", call(path="edge.txt"), "too_large")
    (root / "s1" / "binary.bin").write_bytes(b"\xff\xfe\x00")
    await fails(engine, "fs::read", call(path="binary.bin"), "not_text")
    os.mkfifo(root / "s1" / "pipe")
    await fails(engine, "fs::read", call(path="pipe"), "not_a_file")
    await fails(engine, "fs::read", call(path="a\0b"), "invalid_request")


async def test_invalid_requests(engine: Engine) -> None:
    message = await fails(engine, "fs::read", call(), "invalid_request")
    assert "path" in message
    message = await fails(
        engine, "fs::write", call(path="a", content="x", mode="a"), "invalid_request"
    )
    assert "mode" in message


async def test_list_is_truncated(engine: Engine) -> None:
    for n in range(7):
        await engine.trigger("fs::write", call(path=f"f{n}.txt", content=""))
    listing = await engine.trigger("fs::list", call())
    assert [e["name"] for e in listing["entries"]] == [f"f{n}.txt" for n in range(5)]
    assert listing["truncated"] is True


async def test_schemas_carry_traits_and_descriptions(engine: Engine) -> None:
    infos = {i.function_id: i for i in await engine.list_functions() if i.worker == "files"}
    assert set(infos) == {"fs::read", "fs::write", "fs::list", "files::forget_session"}
    del infos["files::forget_session"]  # not a tool: the deleted-session trigger calls it
    traits = {fid: traits_of(info.request_schema) for fid, info in infos.items()}
    assert (traits["fs::read"].idempotent, traits["fs::read"].parallel) == (True, True)
    assert (traits["fs::list"].idempotent, traits["fs::list"].parallel) == (True, True)
    assert (traits["fs::write"].idempotent, traits["fs::write"].parallel) == (True, False)
    effects = {fid: trait.effect for fid, trait in traits.items()}
    assert effects == {"fs::read": "none", "fs::list": "none", "fs::write": "internal"}
    for info in infos.values():
        assert len(info.description) > 60
        assert info.request_schema is not None
        assert "_call" not in info.request_schema.get("properties", {})
    read_schema = infos["fs::read"].request_schema
    assert read_schema is not None
    assert read_schema["required"] == ["path"]
