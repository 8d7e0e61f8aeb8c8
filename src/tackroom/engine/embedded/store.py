"""The embedded engine's SQLite file: state, queue messages, dead letters and streams.

Called inline on the event loop: writes are short WAL transactions (``synchronous=NORMAL``,
which survives a process crash), cheaper than the thread hop ``asyncio.to_thread`` would add;
the engine's writers share them when they are ready together (:mod:`.commits`). Values are
stored as JSON text.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tackroom.engine.embedded.database import open_database
from tackroom.engine.errors import EngineCorrupt
from tackroom.engine.jsonvalue import dumps, loads
from tackroom.engine.protocol import DeadLetter, InvocationKind, StateEntry, StreamRecord

__all__ = ["SCHEMA_VERSION", "NewMessage", "QueuedMessage", "Store"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state (
    scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, revision INTEGER NOT NULL,
    PRIMARY KEY (scope, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    queue TEXT NOT NULL,
    function_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    grp TEXT,
    headers TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    available_at REAL NOT NULL,
    leased INTEGER NOT NULL DEFAULT 0,
    dead INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS messages_ready ON messages (dead, leased, available_at);
CREATE INDEX IF NOT EXISTS messages_group ON messages (queue, grp, seq) WHERE grp IS NOT NULL;
CREATE TABLE IF NOT EXISTS dedupe (
    queue TEXT NOT NULL, dedupe_key TEXT NOT NULL, message_id TEXT NOT NULL,
    expires_at REAL NOT NULL, PRIMARY KEY (queue, dedupe_key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS streams (
    stream TEXT NOT NULL, grp TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,
    ts REAL NOT NULL, PRIMARY KEY (stream, grp, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_heads (
    stream TEXT NOT NULL, grp TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (stream, grp)) WITHOUT ROWID;
"""


@dataclass(frozen=True, slots=True)
class NewMessage:
    queue: str
    function_id: str
    kind: InvocationKind
    payload: Any
    group: str | None = None
    headers: dict[str, str] | None = None
    dedupe_key: str | None = None


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    seq: int
    id: str
    queue: str
    function_id: str
    kind: InvocationKind
    payload: Any
    group: str | None
    headers: dict[str, str] | None
    attempts: int


class Store:
    def __init__(self, path: Path | None, *, read_only: bool = False) -> None:
        """Open (or create) the database; ``read_only`` writes nothing and creates no file.

        Storage failures (disk full, read-only, damaged file) come out of every call as typed
        engine errors: see :mod:`tackroom.engine.embedded.database`.
        """
        self._db = open_database(path, read_only=read_only, prepare=_prepare)
        # The newest revision: the counter row is written only when a key is deleted (so a
        # deleted key's revision is never handed out again), not on every write.
        self._revision = max(
            int(
                self._db.execute("SELECT value FROM meta WHERE key='state_revision'").fetchone()[0]
            ),
            int(self._db.execute("SELECT COALESCE(MAX(revision), 0) FROM state").fetchone()[0]),
        )

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.begin()
        try:
            yield
            self.commit()
        except BaseException:
            self.rollback()
            raise

    def begin(self, *, immediate: bool = True) -> None:
        """Open a transaction: ``immediate`` takes the write lock now; otherwise the first
        write takes it (this process being the only writer, it never waits for it then)."""
        self._db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")

    def commit(self) -> None:
        self._db.execute("COMMIT")

    def rollback(self) -> None:
        """Roll back the open transaction, if any: a full disk may have rolled it back
        already, or failed the COMMIT itself."""
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    # -- state -------------------------------------------------------------------------------
    def get_state(self, scope: str, key: str) -> StateEntry | None:
        row = self._db.execute(
            "SELECT value, revision FROM state WHERE scope=? AND key=?", (scope, key)
        ).fetchone()
        return None if row is None else StateEntry(scope, key, loads(row[0]), row[1])

    def current_revision(self, scope: str, key: str) -> int:
        row = self._db.execute(
            "SELECT revision FROM state WHERE scope=? AND key=?", (scope, key)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def reserve_revision(self) -> int:
        """A revision no write has had: for a write a unit of work makes later."""
        self._revision += 1
        return self._revision

    def put_state(self, scope: str, key: str, value: Any, *, revision: int | None = None) -> int:
        """Write inside an open transaction; returns the new revision (``revision``: one
        :meth:`reserve_revision` gave)."""
        if revision is None:
            revision = self.reserve_revision()
        self._db.execute(
            "INSERT OR REPLACE INTO state VALUES (?, ?, ?, ?)", (scope, key, dumps(value), revision)
        )
        return revision

    def remove_state(self, scope: str, key: str) -> bool:
        cursor = self._db.execute("DELETE FROM state WHERE scope=? AND key=?", (scope, key))
        if cursor.rowcount > 0:
            self._db.execute(
                "UPDATE meta SET value=? WHERE key='state_revision'", (str(self._revision),)
            )
        return cursor.rowcount > 0

    def list_state(self, scope: str, prefix: str) -> list[StateEntry]:
        if prefix:
            rows = self._db.execute(
                "SELECT key, value, revision FROM state WHERE scope=? AND key>=? AND key<?"
                " ORDER BY key",
                (scope, prefix, prefix + "\U0010ffff"),
            ).fetchall()
        else:
            rows = self._db.execute(
                "SELECT key, value, revision FROM state WHERE scope=? ORDER BY key", (scope,)
            ).fetchall()
        return [StateEntry(scope, key, loads(value), rev) for key, value, rev in rows]

    # -- queue messages ------------------------------------------------------------------------
    def insert_message(
        self,
        message: NewMessage,
        *,
        now: float,
        dedupe_window: float,
        message_id: str | None = None,
    ) -> str:
        """Insert inside an open transaction; returns the id (the earlier one for a dedupe hit)."""
        if message.dedupe_key is not None:
            row = self._db.execute(
                "SELECT message_id FROM dedupe WHERE queue=? AND dedupe_key=? AND expires_at>?",
                (message.queue, message.dedupe_key, now),
            ).fetchone()
            if row is not None:
                return str(row[0])
        message_id = message_id or uuid.uuid4().hex
        self._db.execute(
            "INSERT INTO messages (id, queue, function_id, kind, payload, grp, headers,"
            " available_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                message_id,
                message.queue,
                message.function_id,
                message.kind,
                dumps(message.payload),
                message.group,
                None if message.headers is None else dumps(message.headers),
                now,
                now,
            ),
        )
        if message.dedupe_key is not None:
            self._db.execute(
                "INSERT OR REPLACE INTO dedupe VALUES (?, ?, ?, ?)",
                (message.queue, message.dedupe_key, message_id, now + dedupe_window),
            )
        return message_id

    def ready_messages(
        self, *, now: float, function_ids: set[str], skip_queues: set[str], limit: int
    ) -> list[QueuedMessage]:
        """Deliverable messages, oldest first: due, not leased, not dead, head of their group.

        Only messages of ``function_ids`` (served here) and not of ``skip_queues`` (full).
        """
        if not function_ids:
            return []
        marks = ",".join("?" * len(function_ids))
        skip = ",".join("?" * len(skip_queues))
        rows = self._db.execute(
            "SELECT seq, id, queue, function_id, kind, payload, grp, headers, attempts"
            " FROM messages m WHERE dead=0 AND leased=0 AND available_at<=?"
            f" AND function_id IN ({marks}) AND queue NOT IN ({skip})"
            " AND (grp IS NULL OR seq=(SELECT MIN(seq) FROM messages g"
            "      WHERE g.queue=m.queue AND g.grp=m.grp AND g.dead=0))"
            " ORDER BY seq LIMIT ?",
            (now, *function_ids, *skip_queues, limit),
        ).fetchall()
        return [
            QueuedMessage(
                seq,
                mid,
                queue,
                fid,
                kind,
                loads(payload),
                grp,
                None if headers is None else loads(headers),
                attempts,
            )
            for seq, mid, queue, fid, kind, payload, grp, headers, attempts in rows
        ]

    def next_available_at(self, function_ids: set[str], *, after: float) -> float | None:
        """The earliest time after ``after`` at which a waiting message becomes due."""
        if not function_ids:
            return None
        marks = ",".join("?" * len(function_ids))
        row = self._db.execute(
            "SELECT MIN(available_at) FROM messages WHERE dead=0 AND leased=0"
            f" AND available_at>? AND function_id IN ({marks})",
            (after, *function_ids),
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def lease(self, message_id: str) -> None:
        self._db.execute(
            "UPDATE messages SET leased=1, attempts=attempts+1 WHERE id=?", (message_id,)
        )

    def ack(self, message_id: str) -> None:
        self._db.execute("DELETE FROM messages WHERE id=?", (message_id,))

    def retry_later(self, message_id: str, *, available_at: float, error: str) -> None:
        self._db.execute(
            "UPDATE messages SET leased=0, available_at=?, last_error=? WHERE id=?",
            (available_at, error, message_id),
        )

    def release_unattempted(self, message_id: str) -> None:
        """Give a lease back without counting the attempt (clean shutdown)."""
        self._db.execute(
            "UPDATE messages SET leased=0, attempts=MAX(attempts-1, 0) WHERE id=?", (message_id,)
        )

    def bury(self, message_id: str, *, error: str) -> None:
        self._db.execute(
            "UPDATE messages SET leased=0, dead=1, last_error=? WHERE id=?", (error, message_id)
        )

    def release_all_leases(self) -> None:
        self._db.execute("UPDATE messages SET leased=0 WHERE leased=1")

    def dead_letters(self, queue: str) -> list[DeadLetter]:
        rows = self._db.execute(
            "SELECT id, function_id, payload, grp, attempts, last_error FROM messages"
            " WHERE queue=? AND dead=1 ORDER BY seq",
            (queue,),
        ).fetchall()
        return [
            DeadLetter(mid, queue, fid, loads(payload), grp, attempts, last_error or "")
            for mid, fid, payload, grp, attempts, last_error in rows
        ]

    def redrive(self, queue: str, message_ids: list[str] | None, *, now: float) -> int:
        sql = (
            "UPDATE messages SET dead=0, leased=0, attempts=0, available_at=?"
            " WHERE queue=? AND dead=1"
        )
        params: tuple[Any, ...] = (now, queue)
        if message_ids is not None:
            if not message_ids:
                return 0
            sql += f" AND id IN ({','.join('?' * len(message_ids))})"
            params = (*params, *message_ids)
        return self._db.execute(sql, params).rowcount

    def purge_dedupe(self, *, now: float) -> None:
        self._db.execute("DELETE FROM dedupe WHERE expires_at<=?", (now,))

    # -- streams -----------------------------------------------------------------------------
    def stream_head(self, stream: str, group_id: str) -> int:
        row = self._db.execute(
            "SELECT seq FROM stream_heads WHERE stream=? AND grp=?", (stream, group_id)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def insert_record(self, record: StreamRecord) -> None:
        """Inside an open transaction; :meth:`put_heads` must follow before it commits."""
        self._db.execute(
            "INSERT INTO streams VALUES (?, ?, ?, ?, ?)",
            (record.stream, record.group_id, record.seq, dumps(record.data), record.timestamp),
        )

    def put_heads(self, heads: dict[tuple[str, str], int]) -> None:
        """Each stream group's last sequence, once per transaction however many it appended."""
        self._db.executemany(
            "INSERT OR REPLACE INTO stream_heads VALUES (?, ?, ?)",
            [(stream, group_id, seq) for (stream, group_id), seq in heads.items()],
        )

    def trim_stream(
        self, stream: str, group_id: str, *, below_seq: int | None, before_ts: float | None
    ) -> None:
        if below_seq is not None:
            self._db.execute(
                "DELETE FROM streams WHERE stream=? AND grp=? AND seq<?",
                (stream, group_id, below_seq),
            )
        if before_ts is not None:
            self._db.execute(
                "DELETE FROM streams WHERE stream=? AND grp=? AND ts<?",
                (stream, group_id, before_ts),
            )

    def delete_group(self, stream: str, group_id: str) -> int:
        """Delete the group's records; its ``stream_heads`` row stays, so no sequence repeats."""
        return self._db.execute(
            "DELETE FROM streams WHERE stream=? AND grp=?", (stream, group_id)
        ).rowcount

    def apply_retention(self, stream: str, *, max_len: int | None, before_ts: float | None) -> None:
        """Trim every group of ``stream`` to its last ``max_len`` records and ``before_ts``."""
        if max_len is not None:
            self._db.execute(
                "DELETE FROM streams WHERE stream=? AND seq<=(SELECT h.seq FROM stream_heads h"
                " WHERE h.stream=streams.stream AND h.grp=streams.grp)-?",
                (stream, max_len),
            )
        if before_ts is not None:
            self._db.execute("DELETE FROM streams WHERE stream=? AND ts<?", (stream, before_ts))

    def read_stream(
        self, stream: str, group_id: str, *, after: int, limit: int, min_ts: float | None
    ) -> list[StreamRecord]:
        rows = self._db.execute(
            "SELECT seq, data, ts FROM streams WHERE stream=? AND grp=? AND seq>? AND ts>=?"
            " ORDER BY seq LIMIT ?",
            (stream, group_id, after, -1.0 if min_ts is None else min_ts, limit),
        ).fetchall()
        return [StreamRecord(stream, group_id, seq, loads(data), ts) for seq, data, ts in rows]


def _prepare(db: sqlite3.Connection, writable: bool) -> None:
    """WAL and the schema on a new connection (when ``writable``); check the schema version."""
    if writable:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
    elif not db.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone():
        raise EngineCorrupt("it has no meta table")
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is None:
        if not writable:
            raise EngineCorrupt("it has no schema version")
        db.execute(
            "INSERT INTO meta VALUES ('schema_version', ?), ('state_revision', '0')",
            (str(SCHEMA_VERSION),),
        )
    elif int(row[0]) != SCHEMA_VERSION:
        raise RuntimeError(f"engine database schema {row[0]}; this tackroom reads {SCHEMA_VERSION}")


def wall_clock() -> float:
    return time.time()
