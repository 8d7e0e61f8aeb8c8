"""One workspace root per bus, and each session bound to its root (private to the ``files`` worker).

A root is known by its resolved path and the id in its marker file (:data:`ROOT_MARKER`, written
once, atomically, by the first worker to use the folder): two machines with the same path on two
local disks are two roots. At start a worker publishes its root in :data:`WORKSPACE_ROOT` when the
bus has none, agrees when it is the same, takes the record over when no worker serves ``fs::*``
any more, and otherwise refuses to start (:class:`WorkspaceRootMismatch`). The first call of a
session binds the session to the root in :data:`WORKSPACE_SESSIONS`; a worker under another root
refuses the session's calls with ``workspace_elsewhere`` instead of answering from an empty folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import uuid
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from tackroom.contracts.files import (
    FS_READ,
    ROOT_MARKER,
    WORKSPACE_ELSEWHERE,
    WORKSPACE_ROOT,
    WORKSPACE_SESSIONS,
    WorkspaceRoot,
)
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import Engine
from tackroom.kit.workspace import check_session_name
from tackroom.runtime.errors import HarnessError

__all__ = ["SessionRoots", "WorkspaceRootError", "WorkspaceRootMismatch", "claim_root", "identify"]

_log = logging.getLogger("tackroom.workers.files")

CURRENT = "current"
_ATTEMPTS = 5
_REMEMBERED = 10_000


class WorkspaceRootError(HarnessError):
    """The workspace root cannot be used (its marker cannot be written or read)."""


class WorkspaceRootMismatch(HarnessError):
    """Another ``files`` worker on the bus serves workspaces from another root."""

    def __init__(self, mine: WorkspaceRoot, theirs: WorkspaceRoot) -> None:
        self.mine, self.theirs = mine, theirs
        super().__init__(
            f"this worker's workspace root is {describe(mine)}, but another files worker on the"
            f" bus serves {describe(theirs)}: give every files worker one workspace_root (the"
            " same absolute path on a disk they share), or run them on separate buses (NATS"
            " namespaces)"
        )


def describe(root: WorkspaceRoot) -> str:
    where = f" on {root.host}" if root.host else ""
    return f"{root.path} (root id {root.root_id[:12]}{where})"


class _Marker(BaseModel):
    model_config = ConfigDict(extra="ignore")

    schema_version: int = 1
    root_id: str


def identify(root: Path) -> WorkspaceRoot:
    """The root at ``root`` (created ``0700``, its marker written if missing). Blocking."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        resolved = root.resolve()
        marker = resolved / ROOT_MARKER
        root_id = _read_marker(marker) or _write_marker(marker)
    except OSError as exc:
        raise WorkspaceRootError(f"workspace root {root}: {exc.strerror or exc}") from None
    return WorkspaceRoot(path=str(resolved), root_id=root_id, host=socket.gethostname())


def _read_marker(marker: Path) -> str | None:
    try:
        text = marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return _Marker.model_validate(json.loads(text)).root_id
    except (ValueError, ValidationError):
        raise WorkspaceRootError(
            f"{marker} is not a workspace root marker (JSON with root_id); remove it and restart"
        ) from None


def _write_marker(marker: Path) -> str:
    """Write a new marker, complete before it appears (a link, which never replaces a file); if
    another worker wrote one first, its id wins."""
    root_id = uuid.uuid4().hex
    draft = marker.with_name(f"{ROOT_MARKER}.{root_id}.tmp")
    draft.write_text(_Marker(root_id=root_id).model_dump_json(), encoding="utf-8")
    try:
        os.link(draft, marker)
    except FileExistsError:
        return _read_marker(marker) or root_id
    finally:
        with contextlib.suppress(OSError):
            draft.unlink()
    return root_id


async def claim_root(engine: Engine, mine: WorkspaceRoot) -> None:
    """Publish ``mine`` as the bus's root, agree with it, or raise :class:`WorkspaceRootMismatch`
    when a live worker serves another root."""
    for _ in range(_ATTEMPTS):
        found = await WORKSPACE_ROOT.get_entry(engine, CURRENT)
        if found is not None and found[0].same_root(mine):
            return
        if found is not None and await _served(engine):
            raise WorkspaceRootMismatch(mine, found[0])
        try:
            await WORKSPACE_ROOT.set(
                engine, CURRENT, mine, expected_revision=found[1] if found else 0
            )
        except RevisionConflict:
            continue  # another worker published meanwhile: look again
        if found is not None:
            _log.warning(
                "files: the bus's workspace root moves from %s to %s; sessions created under"
                " the old root are refused here (workspace_elsewhere)",
                describe(found[0]),
                describe(mine),
            )
        return
    raise WorkspaceRootError("the bus's workspace root kept changing; start the worker again")


async def _served(engine: Engine) -> bool:
    return any(info.function_id == FS_READ.id for info in await engine.list_functions())


class SessionRoots:
    """Binds each session to a root at its first call, and refuses sessions of another root.

    A binding never changes, so the sessions found bound to this root are remembered: a session
    costs one state read (and one write when it is new) per process, not one per call.
    """

    def __init__(self, engine: Engine, mine: WorkspaceRoot) -> None:
        self._engine = engine
        self._mine = mine
        self._here: set[str] = set()

    async def check(self, session_id: str) -> None:
        if session_id in self._here:
            return
        check_session_name(session_id)
        bound = await self._bind(session_id)
        if not bound.same_root(self._mine):
            raise FunctionError(WORKSPACE_ELSEWHERE, self._elsewhere(session_id, bound))
        if len(self._here) >= _REMEMBERED:
            self._here.clear()
        self._here.add(session_id)

    async def _bind(self, session_id: str) -> WorkspaceRoot:
        for _ in range(_ATTEMPTS):
            bound = await WORKSPACE_SESSIONS.get(self._engine, session_id)
            if bound is not None:
                return bound
            with contextlib.suppress(RevisionConflict):
                await WORKSPACE_SESSIONS.set(
                    self._engine, session_id, self._mine, expected_revision=0
                )
                return self._mine
        raise FunctionError("internal", f"session {session_id!r}: its workspace root kept changing")

    def _elsewhere(self, session_id: str, bound: WorkspaceRoot) -> str:
        why = (
            "the same path, but another folder (another disk, or the root was replaced)"
            if bound.path == self._mine.path
            else "another folder"
        )
        return (
            f"session {session_id!r} keeps its files under {describe(bound)}, and this files"
            f" worker serves {describe(self._mine)}: {why}; every files worker on a bus must"
            " share one workspace_root"
        )
