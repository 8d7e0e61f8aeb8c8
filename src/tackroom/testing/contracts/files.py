"""The contract of a files worker (``fs::read``, ``fs::write``, ``fs::list``), by function id.

Any worker that replaces ``files`` (an object store, a remote disk) proves it fits by running
this suite: subclass :class:`FilesContract` in a ``test_*.py`` module, name the worker, and — if
its config differs — say how to keep the session workspaces under a given folder
(:meth:`FilesContract.configure`)::

    class TestMyFiles(FilesContract):
        worker_name = "my-files"

The layout is the shared workspace contract (:mod:`tackroom.contracts.files`): a session's files
live in ``<workspace_root>/<session_id>/``, found from the ``_call`` context of each call, so what
the suite writes there on disk is what ``fs::read`` answers and what ``fs::write`` writes is
there on disk. Paths are relative to the workspace; absolute paths, ``..`` and symlinks that lead
outside are refused with ``path_outside_workspace``, and nothing outside is read or written.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.contracts.files import (
    FS_LIST,
    FS_READ,
    FS_WRITE,
    NO_CALL_CONTEXT,
    NOT_FOUND,
    PATH_OUTSIDE_WORKSPACE,
    ListResponse,
    ReadResponse,
    WriteResponse,
)
from tackroom.contracts.tools import traits_of
from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["FilesContract"]

READ, WRITE, LIST = FS_READ.id, FS_WRITE.id, FS_LIST.id


def in_session(session: str = "s1", **arguments: Any) -> dict[str, Any]:
    """A tool call's payload: the model's arguments and the ``_call`` context of ``session``."""
    return {**arguments, "_call": {"session_id": session, "function_call_id": "c1"}}


class FilesContract(WorkerContract):
    worker_name: ClassVar[str] = "files"

    def configure(self, workspace_root: Path) -> dict[str, Any]:
        """The worker's config section: session workspaces under ``workspace_root``."""
        return {"workspace_root": str(workspace_root)}

    @pytest.fixture
    def root(self, tmp_path: Path) -> Path:
        return tmp_path / "workspaces"

    @pytest.fixture
    async def bus(self, engine_url: str, root: Path) -> AsyncIterator[Engine]:
        async with self.hosted(engine_url, self.configure(root)) as engine:
            yield engine

    async def read(self, bus: Engine, path: str, session: str = "s1") -> str:
        reply = await self.call(bus, READ, in_session(session, path=path))
        return ReadResponse.model_validate(reply).content

    async def write(self, bus: Engine, path: str, content: str, session: str = "s1") -> int:
        reply = await self.call(bus, WRITE, in_session(session, path=path, content=content))
        return WriteResponse.model_validate(reply).bytes_written

    async def listing(self, bus: Engine, path: str = ".") -> list[tuple[str, str, int]]:
        reply = ListResponse.model_validate(await self.call(bus, LIST, in_session(path=path)))
        assert reply.truncated is False
        return [(entry.name, entry.type, entry.size) for entry in reply.entries]

    async def workspace(self, bus: Engine, root: Path) -> Path:
        """Session ``s1``'s workspace folder on disk, made by a first call."""
        await self.listing(bus)
        workspace = root / "s1"
        assert workspace.is_dir()
        return workspace

    # -- reading and writing -------------------------------------------------------------------
    async def test_what_is_written_is_read_back_whole(self, bus: Engine, root: Path) -> None:
        assert await self.write(bus, "notes/todo.md", "héllo\nwörld\n") == len(
            "héllo\nwörld\n".encode()
        )
        assert await self.read(bus, "notes/todo.md") == "héllo\nwörld\n"
        assert await self.write(bus, "notes/todo.md", "short") == 5
        assert await self.read(bus, "notes/todo.md") == "short"  # replaced, not patched
        assert await self.write(bus, "empty.txt", "") == 0
        assert await self.read(bus, "empty.txt") == ""
        assert (root / "s1" / "notes" / "todo.md").read_text(encoding="utf-8") == "short"

    async def test_the_workspace_is_the_sessions_folder_on_disk(
        self, bus: Engine, root: Path
    ) -> None:
        workspace = await self.workspace(bus, root)
        (workspace / "given.txt").write_text("from the host\n", encoding="utf-8")
        assert await self.read(bus, "given.txt") == "from the host\n"
        assert await self.read(bus, "./given.txt") == "from the host\n"
        await self.write(bus, "secret.txt", "s1 only", session="s1")
        failure = await self.failure(bus, READ, in_session("s2", path="secret.txt"))
        assert failure.remote_code == NOT_FOUND  # another session is another folder
        await self.write(bus, "secret.txt", "s2's own", session="s2")
        assert (root / "s2" / "secret.txt").read_text(encoding="utf-8") == "s2's own"
        assert await self.read(bus, "secret.txt", session="s1") == "s1 only"

    # -- listing -------------------------------------------------------------------------------
    async def test_a_folder_lists_sorted_with_types_and_sizes(
        self, bus: Engine, root: Path
    ) -> None:
        assert await self.listing(bus) == []
        await self.write(bus, "b.txt", "four")
        await self.write(bus, "a/inner.txt", "é")
        (root / "s1" / "link").symlink_to("b.txt")
        entries = await self.listing(bus)
        assert [(name, kind) for name, kind, _ in entries] == [
            ("a", "directory"),
            ("b.txt", "file"),
            ("link", "symlink"),
        ]
        assert [size for _, _, size in entries[:2]] == [0, 4]
        assert await self.listing(bus, "a") == [("inner.txt", "file", 2)]
        assert await self.read(bus, "link") == "four"  # a symlink inside is followed

    # -- staying inside ------------------------------------------------------------------------
    async def test_paths_that_climb_out_are_refused_and_touch_nothing(
        self, bus: Engine, root: Path, tmp_path: Path
    ) -> None:
        await self.workspace(bus, root)
        (tmp_path / "outside.txt").write_text("outside", encoding="utf-8")
        for path in (
            "../escaped.txt",
            "a/../../escaped.txt",
            "..",
            "../../outside.txt",
            str(tmp_path / "outside.txt"),
            "/etc/passwd",
        ):
            for function_id, payload in (
                (READ, in_session(path=path)),
                (WRITE, in_session(path=path, content="pwned")),
                (LIST, in_session(path=path)),
            ):
                code = await self.code_of(bus, function_id, payload)
                assert code == PATH_OUTSIDE_WORKSPACE, (function_id, path)
        assert not (root / "escaped.txt").exists()
        assert not (tmp_path / "escaped.txt").exists()
        assert (tmp_path / "outside.txt").read_text(encoding="utf-8") == "outside"

    async def test_a_symlink_out_is_no_way_out(
        self, bus: Engine, root: Path, tmp_path: Path
    ) -> None:
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_text("secret", encoding="utf-8")
        workspace = await self.workspace(bus, root)
        (workspace / "out").symlink_to(outside)
        (workspace / "secret-link").symlink_to(outside / "secret.txt")
        for function_id, payload in (
            (READ, in_session(path="out/secret.txt")),
            (READ, in_session(path="secret-link")),
            (WRITE, in_session(path="out/new.txt", content="pwned")),
            (WRITE, in_session(path="secret-link", content="pwned")),
            (LIST, in_session(path="out")),
        ):
            code = await self.code_of(bus, function_id, payload)
            assert code == PATH_OUTSIDE_WORKSPACE, payload
        assert sorted(os.listdir(outside)) == ["secret.txt"]
        assert (outside / "secret.txt").read_text(encoding="utf-8") == "secret"

    # -- typed errors --------------------------------------------------------------------------
    async def test_a_missing_file_or_folder_is_not_found(self, bus: Engine) -> None:
        assert await self.code_of(bus, READ, in_session(path="missing.txt")) == NOT_FOUND
        assert await self.code_of(bus, READ, in_session(path="nope/missing.txt")) == NOT_FOUND
        assert await self.code_of(bus, LIST, in_session(path="missing")) == NOT_FOUND

    async def test_bad_requests_are_refused(self, bus: Engine) -> None:
        for function_id, payload in (
            (READ, in_session()),  # no path
            (READ, in_session(path="")),
            (WRITE, in_session(path="a.txt")),  # no content
            (WRITE, in_session(path="a.txt", content="x", mode="append")),
        ):
            code = await self.code_of(bus, function_id, payload)
            assert code == "invalid_request", payload
        no_session: list[tuple[str, dict[str, Any] | None]] = [
            (READ, {"path": "a.txt"}),  # no _call context: no session, no workspace
            (LIST, None),
            (WRITE, in_session("..", path="a.txt", content="x")),
            (LIST, in_session("a/b")),
        ]
        for function_id, bare in no_session:
            assert await self.code_of(bus, function_id, bare) == NO_CALL_CONTEXT, bare
        assert await self.listing(bus) == []  # nothing was written

    async def test_the_tools_are_published_with_their_traits(self, bus: Engine) -> None:
        infos = {info.function_id: info for info in await bus.list_functions()}
        for tool in (FS_READ, FS_WRITE, FS_LIST):
            info = infos[tool.id]
            assert info.description
            assert "_call" not in (info.request_schema or {}).get("properties", {})
        read, write, list_ = (traits_of(infos[i].request_schema) for i in (READ, WRITE, LIST))
        assert (read.read_only, read.idempotent) == (True, True)
        assert (list_.read_only, list_.idempotent) == (True, True)
        assert (write.read_only, write.parallel) == (False, False)
        assert {"path", "content"} <= set((infos[WRITE].request_schema or {})["properties"])
