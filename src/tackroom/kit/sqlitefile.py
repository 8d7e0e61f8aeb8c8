"""Opening a worker's own SQLite file that several processes may open at once."""

from __future__ import annotations

import sqlite3
import time

__all__ = ["use_wal"]

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
