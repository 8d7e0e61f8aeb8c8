"""The audit log's SQLite file: records by seq, the chain's anchor and head, run principals.

Synchronous and thread-safe (one connection behind a lock; the worker calls it through
``asyncio.to_thread``). One append, or one batch the reader took, is one ``BEGIN IMMEDIATE``
transaction that reads the head, writes the records and moves the head, so appenders (tasks of
one process, or processes sharing the file) are serialised by SQLite and the chain never forks.
Tables:

- ``meta``: ``schema_version``, the anchor (``anchor_seq``, ``anchor_hash``: where the kept
  chain starts once older records were archived) and the head (``head_seq``, ``head_hash``);
- ``records``: ``seq`` (the row id), ``fact_id`` (unique: a fact is recorded once), time,
  session, kind, and ``body`` — the record's canonical JSON, exactly what is hashed and exported;
- ``runs``: the principal each run acts for, learnt from its events (later events name only the
  run).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from tackroom.contracts.audit import (
    GENESIS_HASH,
    AuditFact,
    AuditStatus,
    ChainAnchor,
    VerifyReport,
)
from tackroom.contracts.principal import Principal
from tackroom.kit.audit import canonical, export_header, record_hash, verify_chain
from tackroom.kit.sqlitefile import Transaction, open_versioned

__all__ = ["SCHEMA_VERSION", "Appended", "AuditStore", "StoreError", "iso_time"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    fact_id TEXT NOT NULL UNIQUE,
    ts REAL NOT NULL,
    session_id TEXT,
    kind TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_ts ON records (ts);
CREATE INDEX IF NOT EXISTS records_by_session ON records (session_id, seq);
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, principal TEXT NOT NULL, ts REAL);
"""


class StoreError(Exception):
    """The store file cannot be used (another schema, not a database, not writable)."""


@dataclass(frozen=True, slots=True)
class Appended:
    seq: int
    hash: str
    duplicate: bool


def iso_time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AuditStore:
    """One SQLite file of audit records; open with :meth:`open`, close with :meth:`close`."""

    def __init__(self, db: sqlite3.Connection, path: Path, clock: Callable[[], float]) -> None:
        self._db = db
        self.path = path
        self._lock = threading.Lock()
        self._clock = clock

    @classmethod
    def open(cls, path: Path, *, clock: Callable[[], float] = time.time) -> Self:
        db = open_versioned(
            path,
            schema=_SCHEMA,
            version=SCHEMA_VERSION,
            what="audit log",
            elsewhere="point worker_config.audit.path elsewhere",
            error=StoreError,
            busy_timeout_ms=10000,
            synchronous="FULL",
        )
        return cls(db, path, clock)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- meta --------------------------------------------------------------------------------
    def _meta(self, key: str, default: str) -> str:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else str(row["value"])

    def _set_meta(self, key: str, value: object) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, str(value)))

    def _anchor(self) -> ChainAnchor:
        return ChainAnchor(
            first_seq=int(self._meta("anchor_seq", "1")),
            prev_hash=self._meta("anchor_hash", GENESIS_HASH),
        )

    def _head(self) -> tuple[int, str]:
        return int(self._meta("head_seq", "0")), self._meta("head_hash", GENESIS_HASH)

    # -- writing -----------------------------------------------------------------------------
    def facts_cursor(self) -> int:
        """The last record of ``audit::facts`` read (stored with the fact it held)."""
        with self._lock:
            return int(self._meta("facts_cursor", "0"))

    def find(self, fact_id: str) -> Appended | None:
        """The record of ``fact_id``, if it was recorded."""
        with self._lock:
            row = self._db.execute(
                "SELECT seq, body FROM records WHERE fact_id = ?", (fact_id,)
            ).fetchone()
        if row is None:
            return None
        return Appended(row["seq"], json.loads(row["body"])["hash"], duplicate=True)

    def append(self, fact: AuditFact) -> Appended:
        """Record ``fact`` at the head of the chain (once: a known ``fact_id`` is a no-op)."""
        with self._lock, Transaction(self._db):
            head = self._head()
            appended = self._chain(fact, head)
            if not appended.duplicate:
                self._set_head(appended)
            return appended

    def append_read(self, facts: Sequence[AuditFact], *, facts_seq: int) -> None:
        """Record ``facts`` in order, and ``facts_seq`` as the last ``audit::facts`` record
        read, in one transaction: the reader's batch (one commit, one head update)."""
        with self._lock, Transaction(self._db):
            self._set_meta("facts_cursor", facts_seq)
            head = self._head()
            last: Appended | None = None
            for fact in facts:
                appended = self._chain(fact, head)
                if not appended.duplicate:
                    head, last = (appended.seq, appended.hash), appended
            if last is not None:
                self._set_head(last)

    def _chain(self, fact: AuditFact, head: tuple[int, str]) -> Appended:
        """Insert ``fact``'s record after ``head`` unless it is known; the head is not moved."""
        known = self._db.execute(
            "SELECT seq, body FROM records WHERE fact_id = ?", (fact.fact_id,)
        ).fetchone()
        if known is not None:
            return Appended(known["seq"], json.loads(known["body"])["hash"], duplicate=True)
        fact = self._with_principal(fact)
        head_seq, head_hash = head
        now = self._clock()
        record: dict[str, Any] = {
            **fact.model_dump(mode="json"),
            "seq": head_seq + 1,
            "time": iso_time(now),
            "prev_hash": head_hash,
        }
        record["hash"] = record_hash(record)
        self._db.execute(
            "INSERT INTO records (seq, fact_id, ts, session_id, kind, body)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (record["seq"], fact.fact_id, now, fact.session_id, fact.kind, canonical(record)),
        )
        return Appended(record["seq"], record["hash"], duplicate=False)

    def _set_head(self, appended: Appended) -> None:
        self._set_meta("head_seq", appended.seq)
        self._set_meta("head_hash", appended.hash)

    def _with_principal(self, fact: AuditFact) -> AuditFact:
        """The run's principal as its state changes named it (roles and all) on a fact of the run
        that names none or only its id; a fact naming one of a run not seen yet teaches it."""
        if fact.run_id is None:
            return fact
        row = self._db.execute(
            "SELECT principal FROM runs WHERE run_id = ?", (fact.run_id,)
        ).fetchone()
        if row is None:
            if fact.principal is not None:
                self._remember(fact.run_id, fact.principal)
            return fact
        known = Principal.model_validate_json(row[0])
        if fact.principal is None or fact.principal.id == known.id:
            return fact.model_copy(update={"principal": known})
        return fact

    def _remember(self, run_id: str, principal: Principal) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO runs VALUES (?, ?, ?)",
            (run_id, principal.model_dump_json(), self._clock()),
        )

    def learn_principal(self, run_id: str, principal: Principal) -> None:
        with self._lock, Transaction(self._db):
            self._remember(run_id, principal)

    # -- archiving ---------------------------------------------------------------------------
    def archive(self, *, older_than: float, directory: Path) -> tuple[int, Path | None]:
        """Move the records recorded more than ``older_than`` seconds ago to a JSONL file in
        ``directory`` (written and synced before they are deleted); the anchor moves past them,
        so the kept chain still verifies. Returns how many moved and the file."""
        cutoff = self._clock() - older_than
        with self._lock, Transaction(self._db):
            first_kept = self._db.execute(
                "SELECT MIN(seq) FROM records WHERE ts >= ?", (cutoff,)
            ).fetchone()[0]
            if first_kept is None:
                first_kept = self._head()[0] + 1
            rows = self._db.execute(
                "SELECT body FROM records WHERE seq < ? ORDER BY seq", (first_kept,)
            ).fetchall()
            if not rows:
                return 0, None
            anchor = self._anchor()
            bodies = [r["body"] for r in rows]
            last = first_kept - 1
            last_hash = json.loads(bodies[-1])["hash"]
            target = directory / f"audit-{anchor.first_seq:09d}-{last:09d}.jsonl"
            _write_archive(target, anchor, last, last_hash, bodies)
            self._db.execute("DELETE FROM records WHERE seq <= ?", (last,))
            self._set_meta("anchor_seq", last + 1)
            self._set_meta("anchor_hash", last_hash)
        return len(bodies), target

    # -- reading -----------------------------------------------------------------------------
    def page(
        self, *, after: int, since: float | None, session_id: str | None, limit: int
    ) -> tuple[ChainAnchor, tuple[int, str], list[dict[str, Any]]]:
        """Records after ``after`` by seq, and the anchor they chain from. With ``since``, every
        record from the first one recorded at or after it on (a whole stretch of the chain, so
        its links can be checked), anchored at the record before that first one."""
        with self._lock:
            anchor = self._anchor() if since is None else self._since(since)
            rows = self._db.execute(
                "SELECT body FROM records WHERE seq > ?1 AND (?2 IS NULL OR session_id = ?2)"
                " ORDER BY seq LIMIT ?3",
                (max(after, anchor.first_seq - 1), session_id, limit),
            ).fetchall()
            return anchor, self._head(), [json.loads(r["body"]) for r in rows]

    def _since(self, since: float) -> ChainAnchor:
        """The anchor of the records from ``since`` on: the first one's seq and ``prev_hash``
        (the head's next seq and hash when there is none yet)."""
        first = self._db.execute("SELECT MIN(seq) FROM records WHERE ts >= ?", (since,)).fetchone()
        row = None
        if first[0] is not None:
            row = self._db.execute("SELECT body FROM records WHERE seq = ?", (first[0],)).fetchone()
        if row is None:
            head_seq, head_hash = self._head()
            return ChainAnchor(first_seq=head_seq + 1, prev_hash=head_hash)
        kept = self._anchor()
        if first[0] <= kept.first_seq:
            return kept
        try:
            return ChainAnchor(first_seq=first[0], prev_hash=json.loads(row["body"])["prev_hash"])
        except (ValueError, KeyError, TypeError):  # an edited record: verify names it
            return ChainAnchor(first_seq=first[0], prev_hash=GENESIS_HASH)

    def verify(self) -> VerifyReport:
        with self._lock:
            anchor, head = self._anchor(), self._head()
            rows = self._db.execute("SELECT seq, body FROM records ORDER BY seq")
            check = verify_chain(
                ((row[0], row[1]) for row in rows), anchor=anchor, head=head, unit="row"
            )
        return VerifyReport(
            ok=check.problem is None,
            records=check.records,
            anchor=anchor,
            head_seq=head[0],
            head_hash=head[1],
            problem=check.problem,
        )

    def status(self, *, retention_days: float | None) -> AuditStatus:
        with self._lock:
            row = self._db.execute("SELECT COUNT(*), MIN(ts) FROM records").fetchone()
            head_seq, head_hash = self._head()
            return AuditStatus(
                path=str(self.path),
                records=row[0],
                anchor=self._anchor(),
                head_seq=head_seq,
                head_hash=head_hash,
                oldest=None if row[1] is None else iso_time(row[1]),
                retention_days=retention_days,
            )


def _write_archive(
    target: Path, anchor: ChainAnchor, last: int, last_hash: str, bodies: list[str]
) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with partial.open("w", encoding="utf-8") as out:
        out.write(export_header(anchor, (last, last_hash)) + "\n")
        for body in bodies:
            out.write(body + "\n")
        out.flush()
        os.fsync(out.fileno())
    partial.replace(target)
