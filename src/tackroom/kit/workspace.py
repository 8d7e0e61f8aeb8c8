"""Per-session workspaces, ``<workspace_root>/<session_id>/``: naming them and checking paths.

The layout is a contract between the workers that work in a session's files (``files`` reads and
writes them, ``sandbox`` runs commands in them), so it lives here and not in either worker. These
checks are lexical and by resolution on the host; a worker that opens files also guards against a
symlink swapped in after the check (``files`` opens component by component with ``O_NOFOLLOW``,
``sandbox`` shows the process nothing but the workspace).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from tackroom.contracts.files import NO_CALL_CONTEXT, PATH_OUTSIDE_WORKSPACE, ROOT_MARKER
from tackroom.engine.errors import FunctionError

__all__ = [
    "check_session_name",
    "checked_relative",
    "outside",
    "remove_session_dir",
    "resolve_inside",
    "session_dir",
]

_MAX_NAME_BYTES = 200


def check_session_name(session_id: str, *, code: str = NO_CALL_CONTEXT) -> None:
    """Refuse a session id that cannot name a folder of its own under the root (``code``)."""
    if (
        not session_id
        or session_id in {".", "..", ROOT_MARKER}
        or "/" in session_id
        or "\\" in session_id
        or "\0" in session_id
        or len(session_id.encode()) > _MAX_NAME_BYTES
    ):
        raise FunctionError(code, f"session id {session_id!r} cannot name a workspace directory")


def session_dir(root: Path, session_id: str, *, code: str = NO_CALL_CONTEXT) -> Path:
    """The session's directory under ``root`` (both created ``0700`` if missing), resolved; a
    session id that cannot name a folder fails with ``code``. Blocking."""
    check_session_name(session_id, code=code)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = root.resolve() / session_id
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        raise FunctionError(
            PATH_OUTSIDE_WORKSPACE, f"the workspace of session {session_id!r} is not a folder"
        )
    return path


def remove_session_dir(root: Path, session_id: str) -> int:
    """Delete the session's directory under ``root``; returns how many entries went (0: none).

    Never leaves ``root``: a session id that cannot name a folder deletes nothing, a symlink in
    the session's place is unlinked (its target is left alone), and the tree is removed with
    ``shutil.rmtree``'s descriptor-based walk, which does not follow symlinks. Blocking.
    """
    try:
        check_session_name(session_id)
    except FunctionError:
        return 0
    path = root.expanduser().resolve() / session_id
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(mode):
        path.unlink(missing_ok=True)
        return 1
    entries = 1 + sum(len(dirs) + len(files) for _, dirs, files in os.walk(path))
    shutil.rmtree(path, onerror=_gone_is_fine)
    return entries


def _gone_is_fine(function: object, path: str, exc_info: tuple[type, BaseException, Any]) -> None:
    """A concurrent delete of the same tree (a redelivered forget) is not a failure."""
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def outside(raw: str, why: str) -> FunctionError:
    return FunctionError(PATH_OUTSIDE_WORKSPACE, f"{raw!r}: {why}; paths stay inside the workspace")


def checked_relative(raw: str) -> PurePosixPath:
    """``raw`` as a relative path that does not climb: absolute paths and ``..`` are refused
    (``path_outside_workspace``). Lexical only; :func:`resolve_inside` then follows links."""
    if "\0" in raw:
        raise FunctionError("invalid_request", "a path cannot contain a NUL character")
    pure = PurePosixPath(raw)
    if pure.is_absolute():
        raise outside(raw, "absolute paths are not allowed")
    if ".." in pure.parts:
        raise outside(raw, "'..' is not allowed")
    return pure


def resolve_inside(base: Path, pure: PurePosixPath, raw: str) -> tuple[str, ...]:
    """The components, under the resolved workspace ``base``, of the path ``pure`` (from
    :func:`checked_relative`) resolves to; symlinks inside are followed, and one that leads
    outside is refused (``path_outside_workspace``). Blocking."""
    resolved = (base / pure).resolve()
    if not resolved.is_relative_to(base):
        raise outside(raw, "it resolves outside the workspace through a symlink")
    return resolved.relative_to(base).parts
