"""Opening a worker's own SQLite file that several processes may open at once."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["Transaction", "open_versioned", "use_wal"]

_PAUSE = 0.02


def use_wal(db: sqlite3.Connection, *, wait: float = 10.0) -> None:
    """Put ``db`` in WAL mode, waiting up to ``wait`` seconds for another connection.

    Switching a file to WAL takes an exclusive lock and SQLite answers "database is locked" at
    once, without its busy timeout, while another connection holds one — as when two processes
    started in one directory open a new file together. Asking again until the other is done is
    enough: once the file is in WAL mode, the switch is a no-op.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(_PAUSE)


def open_versioned(
    path: Path,
    *,
    schema: str,
    version: int,
    what: str,
    elsewhere: str,
    error: Callable[[str], Exception],
    busy_timeout_ms: int,
    synchronous: str,
) -> sqlite3.Connection:
    """Open (creating it and its directory) the store file at ``path``: rows as
    :class:`sqlite3.Row`, autocommit, WAL, ``synchronous``, the ``schema`` script run, and the
    ``meta`` table's ``schema_version`` set to ``version`` in a new file, checked in an old one.

    A file that cannot be used raises ``error(message)``: the message names ``what`` and
    ``path``, and for another schema version ends with the way out, ``elsewhere``.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise error(f"{what} {path}: cannot open it ({exc})") from None
    db.row_factory = sqlite3.Row
    try:
        db.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        use_wal(db)
        db.execute(f"PRAGMA synchronous = {synchronous}")
        db.executescript(schema)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (version,))
        found = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if str(found["value"]) != str(version):
            raise error(
                f"{what} {path} has schema version {found['value']}; this tackroom reads"
                f" version {version}: {elsewhere}"
            )
    except sqlite3.Error as exc:
        db.close()
        raise error(f"{what} {path}: not a usable SQLite file ({exc})") from None
    except BaseException:
        db.close()
        raise
    return db


class Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` when the body raises) on an autocommit
    connection, as :func:`open_versioned` opens one."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        self._db.execute("ROLLBACK" if exc_type is not None else "COMMIT")
