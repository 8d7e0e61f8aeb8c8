"""Opening the embedded engine's SQLite file, and SQLite's errors as typed engine errors.

- Writing: the file is created owner-only. A file that is damaged, or emptied to 0 bytes, after
  it held the engine's data is kept aside as ``engine.db.corrupt-<time>`` (one warning line) and
  a new database is started; a damaged file not known to be the engine's is refused as it is.
- Reading (``read_only``): ``mode=ro``, or ``immutable`` when the directory cannot take the WAL
  index and no WAL exists; nothing is created, renamed or written. A missing file reads as an
  empty engine.
- Every ``execute`` raises a full disk, a read-only file, a lock held by another program or an
  I/O error as :class:`EngineStorageError`, a damaged file as :class:`EngineCorrupt`, each one
  line naming the file.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

from tackroom.engine.embedded.files import held_data, keep_aside, mark_held
from tackroom.engine.errors import EngineCorrupt, EngineError, EngineStorageError

__all__ = ["BUSY_TIMEOUT", "Prepare", "open_database", "storage_error"]

BUSY_TIMEOUT = 5.0
"""Seconds a statement waits for a lock another program holds on the file."""

Prepare = Callable[[sqlite3.Connection, bool], None]
"""Sets up a new connection (pragmas, schema when the bool says writable); raises
``EngineCorrupt(reason)`` for a SQLite file that is not the engine's (the opener names the file)."""

_log = logging.getLogger(__name__)

_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = (
    3,
    5,
    6,
    8,
    10,
    11,
    13,
    14,
    26,
)


class _Database(sqlite3.Connection):
    """A connection whose ``execute`` raises SQLite's storage errors as typed engine errors."""

    where = ":memory:"
    read_only = False

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.Error as exc:
            error = storage_error(exc, self.where, read_only=self.read_only)
            if error is None:
                raise
            raise error from exc

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        try:
            return super().executemany(sql, parameters)
        except sqlite3.Error as exc:
            error = storage_error(exc, self.where, read_only=self.read_only)
            if error is None:
                raise
            raise error from exc


def storage_error(exc: sqlite3.Error, where: str, *, read_only: bool) -> EngineError | None:
    """The typed error for a storage failure of the file ``where``; ``None`` for other errors."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    primary = code & 0xFF
    if primary == _CORRUPT:
        return EngineCorrupt(f"engine database {where} is damaged ({exc})")
    if primary == _NOTADB:
        return EngineCorrupt(f"engine database {where} is damaged or not a database ({exc})")
    if primary == _FULL:
        return EngineStorageError(f"engine database {where}: the disk is full ({exc})")
    if primary in (_BUSY, _LOCKED):
        return EngineStorageError(
            f"engine database {where} is locked by another program ({exc}); close it "
            "(an open sqlite3 shell?) and try again"
        )
    if primary == _READONLY and read_only:
        return EngineStorageError(f"engine database {where} is open read-only: this only reads")
    if primary in (_READONLY, _CANTOPEN, _PERM):
        return EngineStorageError(
            f"engine database {where} cannot be written ({exc}): check the permissions of the "
            "file and of its directory"
        )
    if primary == _IOERR:
        return EngineStorageError(f"engine database {where}: input/output error ({exc})")
    return None


def open_database(path: Path | None, *, read_only: bool, prepare: Prepare) -> sqlite3.Connection:
    """A prepared connection to the engine database at ``path`` (``None``: in memory)."""
    if path is None:
        return _memory(prepare, read_only=False)
    if read_only:
        return _open_for_reading(path, prepare)
    return _open_for_writing(path, prepare)


def _open_for_writing(path: Path, prepare: Prepare) -> sqlite3.Connection:
    if _is_empty(path) and held_data(path):
        _set_aside(path, f"engine database {path} was emptied to 0 bytes")
    try:
        db = _connect(path, prepare)
    except EngineCorrupt as exc:
        if not held_data(path):
            raise EngineCorrupt(f"{exc}; {_LEFT_ALONE}") from exc
        _set_aside(path, str(exc))
        db = _connect(path, prepare)
    mark_held(path)
    return db


def _open_for_reading(path: Path, prepare: Prepare) -> sqlite3.Connection:
    if not path.exists() or (_is_empty(path) and not held_data(path)):
        return _memory(prepare, read_only=True)
    next_writer = (
        "the next command that writes keeps it aside and starts a new one"
        if held_data(path)
        else _LEFT_ALONE
    )
    if _is_empty(path):
        raise EngineCorrupt(f"engine database {path} was emptied to 0 bytes; {next_writer}")
    # ``mode=ro`` needs the WAL index beside the file; a directory that cannot take one while no
    # WAL exists means nobody is writing, and the file can be read as it stands.
    immutable = not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists()
    try:
        return _connect(path, prepare, read_only=True, immutable=immutable)
    except EngineCorrupt as exc:
        raise EngineCorrupt(f"{exc}; {next_writer}") from exc


_LEFT_ALONE = (
    "tackroom leaves it as it is: move it away to start a new one "
    "(sqlite3's .recover may save what it holds)"
)


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return False


def _set_aside(path: Path, problem: str) -> None:
    try:
        aside = keep_aside(path)
    except OSError as exc:
        raise EngineCorrupt(
            f"{problem}; it cannot be kept aside ({exc.strerror}): move it away to start a new one"
        ) from None
    _log.warning("%s: kept it aside as %s and started a new one", problem, aside.name)


def _connect(
    path: Path, prepare: Prepare, *, read_only: bool = False, immutable: bool = False
) -> sqlite3.Connection:
    if read_only:
        target = f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else "")
    else:
        _create_private(path)
        target = str(path)
    try:
        db = sqlite3.connect(
            target,
            uri=read_only,
            timeout=BUSY_TIMEOUT,
            isolation_level=None,
            check_same_thread=False,
            factory=_Database,
        )
    except sqlite3.Error as exc:
        _raise_typed(exc, str(path), read_only)
    db.where, db.read_only = str(path), read_only
    _prepare(db, prepare, writable=not read_only)
    return db


def _create_private(path: Path) -> None:
    """Create the file owner-only: state may hold anything a worker keeps. SQLite gives the
    ``-wal`` and ``-shm`` files the database file's mode."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError as exc:
        raise EngineStorageError(
            f"engine database {path} cannot be opened for writing ({exc.strerror}): check the "
            "permissions of the file and of its directory"
        ) from None


def _prepare(db: _Database, prepare: Prepare, *, writable: bool) -> None:
    try:
        prepare(db, writable)
        if writable:  # can we write? (a lock held elsewhere, a read-only file) — say so now
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
    except BaseException as exc:
        db.close()
        if isinstance(exc, sqlite3.Error):
            _raise_typed(exc, db.where, not writable)
        if isinstance(exc, EngineCorrupt) and exc.__cause__ is None:  # prepare's own finding
            raise EngineCorrupt(
                f"engine database {db.where} is not a tackroom engine database ({exc})"
            ) from exc
        raise


def _raise_typed(exc: sqlite3.Error, where: str, read_only: bool) -> NoReturn:
    error = storage_error(exc, where, read_only=read_only)
    if error is None:
        raise exc
    raise error from exc


def _memory(prepare: Prepare, *, read_only: bool) -> sqlite3.Connection:
    db = sqlite3.connect(
        ":memory:", isolation_level=None, check_same_thread=False, factory=_Database
    )
    prepare(db, True)
    if read_only:
        db.read_only = True
        db.execute("PRAGMA query_only=1")
    return db
