"""The trace store's SQLite file: spans, one summary row per trace, retention, queries.

Synchronous and thread-safe (one connection behind a lock): the worker calls it through
``asyncio.to_thread``. Tables:

- ``meta``: ``schema_version``, ``cursor`` (the last ``traces::spans`` record read; stored in
  the same transaction as that record's spans, so a restart reads on from there, none twice)
  and ``dropped`` (spans the exporters reported lost);
- ``spans``: one row per span, keyed by ``(trace_id, span_id)`` (a span stored twice is kept
  once), with the run and session its attributes name;
- ``traces``: per trace its run, session, root span name, start, end, span and error counts,
  recomputed from ``spans`` for every trace a batch touches; indexed by start, run and session.

Retention is by whole traces (a waterfall with holes helps no one), enforced after each batch:
traces that ended more than ``max_age`` seconds ago go, then the oldest traces until at most
``max_spans`` spans remain.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tackroom.contracts.traces import (
    RUN_ATTRIBUTES,
    SESSION_ATTRIBUTES,
    SpanBatch,
    SpanRecord,
    StoreStatus,
    TraceDetail,
    TraceSummary,
)
from tackroom.kit.sqlitefile import Transaction, open_versioned

__all__ = ["SCHEMA_VERSION", "Retention", "StoreError", "TraceStore"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS spans (
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_span_id TEXT,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    status_message TEXT,
    service_name TEXT NOT NULL,
    run_id TEXT,
    session_id TEXT,
    attributes TEXT NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (trace_id, span_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    run_id TEXT,
    session_id TEXT,
    root_name TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    span_count INTEGER NOT NULL,
    error_count INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_by_start ON traces (start_ns);
CREATE INDEX IF NOT EXISTS traces_by_end ON traces (end_ns);
CREATE INDEX IF NOT EXISTS traces_by_run ON traces (run_id, start_ns);
CREATE INDEX IF NOT EXISTS traces_by_session ON traces (session_id, start_ns);
CREATE TABLE IF NOT EXISTS forgotten (session_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS forgotten_traces (trace_id TEXT PRIMARY KEY) WITHOUT ROWID;
"""

_SPAN_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, status, status_message,"
    " service_name, run_id, session_id, attributes, events"
)
_TRACE_COLUMNS = (
    "trace_id, run_id, session_id, root_name, start_ns, end_ns, span_count, error_count"
)


class StoreError(Exception):
    """The store file cannot be used (another schema, not a database, not writable)."""


@dataclass(frozen=True, slots=True)
class Retention:
    max_age: float | None = None
    """Seconds a trace is kept after it ended (``None``: no age limit)."""
    max_spans: int | None = None
    """Spans kept at most (``None``: no count limit)."""


def _first_attribute(span: SpanRecord, keys: Sequence[str]) -> str | None:
    for key in keys:
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _span_row(span: SpanRecord) -> tuple[Any, ...]:
    return (
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.name,
        span.kind,
        span.start_ns,
        span.end_ns,
        span.status,
        span.status_message,
        span.service_name,
        _first_attribute(span, RUN_ATTRIBUTES),
        _first_attribute(span, SESSION_ATTRIBUTES),
        json.dumps(span.attributes, ensure_ascii=False, separators=(",", ":")),
        json.dumps(
            [event.model_dump(mode="json") for event in span.events],
            ensure_ascii=False,
            separators=(",", ":"),
        ),
    )


def _summary(row: sqlite3.Row) -> TraceSummary:
    return TraceSummary(
        trace_id=row["trace_id"],
        run_id=row["run_id"],
        session_id=row["session_id"],
        root_name=row["root_name"],
        start_ns=row["start_ns"],
        duration_ms=round((row["end_ns"] - row["start_ns"]) / 1e6, 3),
        span_count=row["span_count"],
        error_count=row["error_count"],
        status="error" if row["error_count"] else "ok",
    )


class TraceStore:
    """One SQLite file of spans; open with :meth:`open`, close with :meth:`close`."""

    def __init__(
        self, db: sqlite3.Connection, *, retention: Retention, clock: Callable[[], float]
    ) -> None:
        self._db = db
        self._lock = threading.Lock()
        self.retention = retention
        self._clock = clock

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        retention: Retention | None = None,
        clock: Callable[[], float] = time.time,
    ) -> TraceStore:
        """Open (creating the file and its directory if needed) the store at ``path``."""
        db = open_versioned(
            path,
            schema=_SCHEMA,
            version=SCHEMA_VERSION,
            what="trace store",
            elsewhere="move the file away or point worker_config.traces.path elsewhere",
            error=StoreError,
            busy_timeout_ms=5000,
            synchronous="NORMAL",
        )
        return cls(db, retention=retention or Retention(), clock=clock)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writing -----------------------------------------------------------------------------
    def ingest(self, batch: SpanBatch, *, seq: int | None = None) -> int:
        """Store ``batch`` (record ``seq`` of the stream, if it came from there), then apply
        the retention; returns how many spans were new."""
        rows = [_span_row(span) for span in batch.spans]
        touched = list(dict.fromkeys(span.trace_id for span in batch.spans))
        with self._lock, self._transaction():
            before = self._db.total_changes
            self._db.executemany(
                f"INSERT OR IGNORE INTO spans ({_SPAN_COLUMNS}) VALUES"
                " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            added = self._db.total_changes - before
            for trace_id in touched:
                self._summarize(trace_id)
            self._drop_forgotten(touched)
            if seq is not None:
                self._set_meta("cursor", seq)
            if batch.dropped:
                self._add_meta("dropped", batch.dropped)
            self._trim()
        return added

    def forget_session(self, session_id: str) -> int:
        """Delete the traces of a deleted session and refuse its spans from now on, and those of
        its traces (they may still be on their way through the stream); returns how many spans
        went."""
        with self._lock, self._transaction():
            self._db.execute("INSERT OR IGNORE INTO forgotten VALUES (?)", (session_id,))
            traces = [
                row["trace_id"]
                for row in self._db.execute(
                    "SELECT trace_id FROM traces WHERE session_id = ?1 UNION"
                    " SELECT trace_id FROM spans WHERE session_id = ?1",
                    (session_id,),
                )
            ]
            self._db.executemany(
                "INSERT OR IGNORE INTO forgotten_traces VALUES (?)", [(t,) for t in traces]
            )
            count = "SELECT COUNT(*) FROM spans WHERE trace_id = ?"
            spans = sum(self._db.execute(count, (t,)).fetchone()[0] for t in traces)
            self._delete(traces)
            return int(spans)

    def _drop_forgotten(self, trace_ids: list[str]) -> None:
        """Delete those of ``trace_ids`` that belong to a forgotten session."""
        self._delete(
            trace_id
            for trace_id in trace_ids
            if self._db.execute(
                "SELECT 1 FROM forgotten_traces WHERE trace_id = ?1 UNION SELECT 1 FROM traces"
                " WHERE trace_id = ?1 AND session_id IN (SELECT session_id FROM forgotten)",
                (trace_id,),
            ).fetchone()
        )

    def _transaction(self) -> Transaction:
        return Transaction(self._db)

    def _summarize(self, trace_id: str) -> None:
        db = self._db
        row = db.execute(
            "SELECT MIN(start_ns) AS start_ns, MAX(end_ns) AS end_ns, COUNT(*) AS spans,"
            " SUM(status = 'error') AS errors, MAX(run_id) AS run_id,"
            " MAX(session_id) AS session_id FROM spans WHERE trace_id = ?",
            (trace_id,),
        ).fetchone()
        root = db.execute(
            "SELECT name FROM spans AS s WHERE trace_id = ?1 AND (parent_span_id IS NULL OR"
            " NOT EXISTS (SELECT 1 FROM spans WHERE trace_id = ?1 AND span_id ="
            " s.parent_span_id)) ORDER BY start_ns, span_id LIMIT 1",
            (trace_id,),
        ).fetchone()
        db.execute(
            f"INSERT OR REPLACE INTO traces ({_TRACE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                trace_id,
                row["run_id"],
                row["session_id"],
                root["name"] if root is not None else "",
                row["start_ns"],
                row["end_ns"],
                row["spans"],
                row["errors"] or 0,
            ),
        )

    def _trim(self) -> None:
        retention = self.retention
        if retention.max_age is not None:
            cutoff = int((self._clock() - retention.max_age) * 1e9)
            old = self._db.execute("SELECT trace_id FROM traces WHERE end_ns < ?", (cutoff,))
            self._delete([row["trace_id"] for row in old.fetchall()])
        if retention.max_spans is not None:
            total = self._db.execute("SELECT COALESCE(SUM(span_count), 0) FROM traces")
            excess = total.fetchone()[0] - retention.max_spans
            if excess > 0:
                self._delete(self._oldest_holding(excess))

    def _oldest_holding(self, count: int) -> list[str]:
        """The oldest traces that together hold at least ``count`` spans."""
        chosen: list[str] = []
        for row in self._db.execute(
            "SELECT trace_id, span_count FROM traces ORDER BY start_ns, trace_id"
        ):
            if count <= 0:
                break
            chosen.append(row["trace_id"])
            count -= row["span_count"]
        return chosen

    def _delete(self, trace_ids: Iterable[str]) -> None:
        ids = [(trace_id,) for trace_id in trace_ids]
        self._db.executemany("DELETE FROM spans WHERE trace_id = ?", ids)
        self._db.executemany("DELETE FROM traces WHERE trace_id = ?", ids)

    def _meta(self, key: str) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return 0 if row is None else int(row["value"])

    def _set_meta(self, key: str, value: int) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def _add_meta(self, key: str, value: int) -> None:
        self._set_meta(key, self._meta(key) + value)

    # -- reading -----------------------------------------------------------------------------
    def cursor(self) -> int:
        with self._lock:
            return self._meta("cursor")

    def list(
        self, *, session_id: str | None = None, run_id: str | None = None, limit: int = 50
    ) -> list[TraceSummary]:
        """Traces newest first, those of ``session_id`` / ``run_id`` when given."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_TRACE_COLUMNS} FROM traces WHERE (?1 IS NULL OR session_id = ?1)"
                " AND (?2 IS NULL OR run_id = ?2) ORDER BY start_ns DESC, trace_id LIMIT ?3",
                (session_id, run_id, limit),
            ).fetchall()
        return [_summary(row) for row in rows]

    def get(self, trace_id: str) -> TraceDetail | None:
        with self._lock:
            summary = self._db.execute(
                "SELECT run_id, session_id FROM traces WHERE trace_id = ?", (trace_id,)
            ).fetchone()
            rows = self._db.execute(
                f"SELECT {_SPAN_COLUMNS} FROM spans WHERE trace_id = ? ORDER BY start_ns, span_id",
                (trace_id,),
            ).fetchall()
        if summary is None or not rows:
            return None
        return TraceDetail(
            trace_id=trace_id,
            run_id=summary["run_id"],
            session_id=summary["session_id"],
            spans=[_span(row) for row in rows],
        )

    def status(self) -> StoreStatus:
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*) AS traces, COALESCE(SUM(span_count), 0) AS spans,"
                " MIN(start_ns) AS oldest FROM traces"
            ).fetchone()
            return StoreStatus(
                traces=row["traces"],
                spans=row["spans"],
                dropped_spans=self._meta("dropped"),
                oldest_start_ns=row["oldest"],
                cursor=self._meta("cursor"),
            )


def _span(row: sqlite3.Row) -> SpanRecord:
    fields = dict(zip(row.keys(), row, strict=True))
    fields["attributes"] = json.loads(fields["attributes"])
    fields["events"] = json.loads(fields["events"])
    del fields["run_id"], fields["session_id"]
    return SpanRecord.model_validate(fields)
