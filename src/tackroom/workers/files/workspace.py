"""A per-session workspace directory that paths cannot escape (private to the ``files`` worker).

A path is checked twice. First lexically and by resolution (:mod:`tackroom.kit.workspace`, shared
with the ``sandbox`` worker): absolute paths and ``..`` are refused, and the path is resolved
(symlinks inside the workspace are followed) and must stay under the session directory. Then it
is opened component by component from the session directory with ``O_NOFOLLOW``, so a symlink
swapped in between the check and the open is refused too (``ELOOP``) instead of followed.
Blocking calls; the worker runs them in a thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from tackroom.contracts.files import (
    IO_ERROR,
    IS_A_DIRECTORY,
    NOT_A_DIRECTORY,
    NOT_A_FILE,
    NOT_FOUND,
    NOT_TEXT,
    TOO_LARGE,
    ListEntry,
)
from tackroom.engine.errors import FunctionError
from tackroom.kit.workspace import (
    checked_relative,
    outside,
    resolve_inside,
    session_dir,
)

__all__ = ["Workspaces"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC


def _os_error(exc: OSError, raw: str) -> FunctionError:
    if exc.errno == errno.ENOENT:
        return FunctionError(NOT_FOUND, f"{raw!r}: no such file or folder")
    if exc.errno == errno.ENOTDIR:
        return FunctionError(NOT_A_DIRECTORY, f"{raw!r}: a part of the path is not a folder")
    if exc.errno == errno.EISDIR:
        return FunctionError(IS_A_DIRECTORY, f"{raw!r} is a folder")
    if exc.errno == errno.ELOOP:
        return outside(raw, "a symlink appeared on the path")
    return FunctionError(IO_ERROR, f"{raw!r}: {exc.strerror or exc}")


@dataclass(frozen=True, slots=True)
class _Located:
    base: Path
    parts: tuple[str, ...]


def _open_dir(base: Path, parts: tuple[str, ...], *, create: bool) -> int:
    """A descriptor of ``base/parts`` opened one component at a time without following links."""
    fd = os.open(base, _DIR_FLAGS)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


class Workspaces:
    """The workspaces under ``root``: one directory per session, created ``0700``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def session_dir(self, session_id: str) -> Path:
        """The session's directory (created if missing), fully resolved."""
        return session_dir(self.root, session_id)

    def locate(self, session_id: str, raw: str) -> _Located:
        pure = checked_relative(raw)
        base = self.session_dir(session_id)
        return _Located(base, resolve_inside(base, pure, raw))

    def key(self, session_id: str, raw: str) -> str:
        """The path as file labels know it: relative to the workspace, symlinks resolved
        (``""``: the workspace folder)."""
        return "/".join(self.locate(session_id, raw).parts)

    # -- operations --------------------------------------------------------------------------
    def read(self, session_id: str, raw: str, *, max_bytes: int) -> str:
        where = self.locate(session_id, raw)
        if not where.parts:
            raise FunctionError(IS_A_DIRECTORY, f"{raw!r} is the workspace folder; use fs::list")
        try:
            parent = _open_dir(where.base, where.parts[:-1], create=False)
            try:
                fd = os.open(where.parts[-1], _READ_FLAGS, dir_fd=parent)
            finally:
                os.close(parent)
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(fd)
                if stat.S_ISDIR(info.st_mode):
                    raise FunctionError(IS_A_DIRECTORY, f"{raw!r} is a folder; use fs::list")
                if not stat.S_ISREG(info.st_mode):
                    raise FunctionError(NOT_A_FILE, f"{raw!r} is not a regular file")
                data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise _os_error(exc, raw) from None
        if len(data) > max_bytes:
            raise FunctionError(
                TOO_LARGE, f"{raw!r} is larger than the {max_bytes}-byte read limit"
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise FunctionError(NOT_TEXT, f"{raw!r} is not UTF-8 text") from None

    def write(self, session_id: str, raw: str, data: bytes) -> int:
        """Replace the file atomically (a temporary file renamed over it); parents created."""
        where = self.locate(session_id, raw)
        if not where.parts:
            raise FunctionError(IS_A_DIRECTORY, f"{raw!r} is the workspace folder")
        name = where.parts[-1]
        try:
            parent = _open_dir(where.base, where.parts[:-1], create=True)
            try:
                with contextlib.suppress(FileNotFoundError):
                    if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                        raise FunctionError(IS_A_DIRECTORY, f"{raw!r} is a folder")
                temporary = f".{name[:200]}.{uuid.uuid4().hex[:12]}.tmp"
                fd = os.open(temporary, _WRITE_FLAGS, 0o600, dir_fd=parent)
                try:
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(data)
                    os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(temporary, dir_fd=parent)
                    raise
            finally:
                os.close(parent)
        except OSError as exc:
            raise _os_error(exc, raw) from None
        return len(data)

    def list(self, session_id: str, raw: str, *, limit: int) -> tuple[list[ListEntry], bool]:
        """Entries sorted by name, at most ``limit``; and whether some were left out."""
        where = self.locate(session_id, raw)
        entries: list[ListEntry] = []
        try:
            fd = _open_dir(where.base, where.parts, create=False)
            try:
                with os.scandir(fd) as scan:
                    found = sorted(scan, key=lambda entry: entry.name)
                for entry in found[:limit]:
                    info = entry.stat(follow_symlinks=False)
                    if entry.is_symlink():
                        kind, size = "symlink", info.st_size
                    elif entry.is_dir(follow_symlinks=False):
                        kind, size = "directory", 0
                    elif entry.is_file(follow_symlinks=False):
                        kind, size = "file", info.st_size
                    else:
                        kind, size = "other", 0
                    entries.append(ListEntry(name=entry.name, type=kind, size=size))
            finally:
                os.close(fd)
        except OSError as exc:
            raise _os_error(exc, raw) from None
        return entries, len(found) > limit
