"""The embedded engine's files beside its database: a directory no other user may change, the
lock that makes one process the owner, and what is done with a database that is not healthy.

``engine.db.lock`` is the lock (``flock``) and also a mark: once the engine has opened a healthy
database at that path it writes :data:`MARK` into it. A database found damaged or emptied later
is then known to have held data, and is kept aside (``engine.db.corrupt-<time>``) rather than
refused as some other program's file.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
import time
from pathlib import Path

from tackroom.engine.errors import EngineLocked, EngineStorageError, UnsafeDirectory

__all__ = ["MARK", "claim", "held_data", "keep_aside", "mark_held", "secure_directory"]

MARK = b"tackroom engine database\n"

_log = logging.getLogger(__name__)


def secure_directory(directory: Path, *, create: bool = True) -> bool:
    """Make sure other users cannot rename or replace what ``directory`` holds.

    A missing directory is created owner-only (0700) when ``create``. One that others may write
    is made private when it is ours (its group and other write bits cleared, said in one
    warning line) and refused with :class:`UnsafeDirectory` otherwise, as is a shared sticky
    directory such as ``/tmp``. Returns whether the directory exists.
    """
    try:
        info = directory.stat()
    except FileNotFoundError:
        if not create:
            return False
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise EngineStorageError(f"cannot create {directory} ({exc.strerror})") from None
        return True
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o022:
        return True
    if info.st_uid != os.geteuid() or mode & stat.S_ISVTX:
        raise UnsafeDirectory(
            f"{directory} is writable by other users (mode {mode:o}, owner uid {info.st_uid}), "
            "who could rename the engine's files away: keep them in a directory of your own"
        )
    private = mode & ~0o022
    try:
        directory.chmod(private)
    except OSError as exc:
        raise UnsafeDirectory(
            f"{directory} is writable by other users (mode {mode:o}) and cannot be made "
            f"private ({exc.strerror}): keep the engine's files in a directory of your own"
        ) from None
    _log.warning(
        "%s was writable by other users (mode %o); made it %o so nobody else can rename "
        "the engine's files",
        directory,
        mode,
        private,
    )
    return True


def claim(path: Path, *, read_only: bool = False) -> int | None:
    """Take the owner's lock beside the database at ``path``; returns its descriptor.

    Writing takes it exclusively, creating the directory and the lock file as needed. Reading
    shares it and creates nothing: with no lock file there is no owner to wait for (``None``).
    Another owner: :class:`EngineLocked`.
    """
    if not secure_directory(path.parent, create=not read_only):
        return None
    lock = Path(f"{path}.lock")
    flags = os.O_RDONLY if read_only else os.O_RDWR | os.O_CREAT
    try:
        fd = os.open(lock, flags, 0o600)
    except OSError as exc:
        if read_only and isinstance(exc, FileNotFoundError):
            return None
        raise EngineStorageError(
            f"cannot open the engine's lock file {lock} ({exc.strerror}): check the permissions "
            f"of {path.parent}"
        ) from None
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if read_only else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise EngineLocked(
            f"another process owns the engine at {path}; reach it through its local endpoint"
        ) from None
    return fd


def held_data(path: Path) -> bool:
    """Whether the engine once opened a healthy database at ``path`` (see :data:`MARK`)."""
    try:
        with open(f"{path}.lock", "rb") as lock:
            return lock.read(len(MARK)) == MARK
    except OSError:
        return False


def mark_held(path: Path) -> None:
    """Note in the lock file that the database at ``path`` is the engine's (best effort)."""
    if held_data(path):
        return
    try:
        fd = os.open(f"{path}.lock", os.O_WRONLY)
    except OSError:
        return
    try:
        os.pwrite(fd, MARK, 0)
    except OSError:
        pass
    finally:
        os.close(fd)


def keep_aside(path: Path) -> Path:
    """Rename the database at ``path`` (with its ``-wal`` and ``-shm``) out of the way.

    The new name is ``<name>.corrupt-<UTC time>``; SQLite still finds the renamed WAL beside it,
    so ``sqlite3 <new name> .recover`` sees everything that was there.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    serial = 1
    while aside.exists():
        serial += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{serial}")
    for suffix in ("-wal", "-shm", ""):
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.rename(f"{aside}{suffix}")
    return aside
