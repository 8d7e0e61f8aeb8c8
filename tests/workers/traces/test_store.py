"""The trace store's SQLite file: spans in, traces out, retention, the cursor, the schema."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.traces import SpanBatch
from tackroom.testing.contracts.traces import span
from tackroom.workers.traces.store import Retention, StoreError, TraceStore

SECOND = 1_000_000_000


def batch(*spans: dict[str, Any], dropped: int = 0) -> SpanBatch:
    return SpanBatch.model_validate({"spans": list(spans), "dropped": dropped})


def trace_id(name: str) -> str:
    return hashlib.md5(name.encode()).hexdigest()


def trace_of(name: str, *, at_ms: float, spans: int = 1, **attributes: Any) -> SpanBatch:
    """A trace whose root is ``name``, of ``spans`` spans, starting at ``at_ms``."""
    tid = trace_id(name)
    root = span(tid, "1", name=name, start_ms=at_ms, end_ms=at_ms + 10, **attributes)
    children = [
        span(tid, str(n), parent="1", start_ms=at_ms + n, end_ms=at_ms + n + 1)
        for n in range(2, spans + 1)
    ]
    return batch(root, *children)


@pytest.fixture
def store(tmp_path: Path) -> TraceStore:
    return TraceStore.open(tmp_path / "t" / "traces.db")


def test_a_trace_is_summarized_from_its_spans(store: TraceStore) -> None:
    added = store.ingest(
        batch(
            span("a", "2", parent="1", name="child", start_ms=3, end_ms=5, status="error"),
            span("a", "1", name="root", end_ms=20, session__id="s1"),
            span("a", "3", parent="2", name="grandchild", start_ms=4, end_ms=5, run__id="r1"),
        )
    )
    assert added == 3
    (summary,) = store.list()
    assert (summary.root_name, summary.span_count, summary.error_count) == ("root", 3, 1)
    assert (summary.run_id, summary.session_id, summary.status) == ("r1", "s1", "error")
    assert summary.duration_ms == 20.0
    detail = store.get("a".rjust(32, "0"))
    assert detail is not None
    assert [s.name for s in detail.spans] == ["root", "child", "grandchild"]
    assert (detail.run_id, detail.session_id) == ("r1", "s1")


def test_a_span_stored_twice_is_kept_once(store: TraceStore) -> None:
    assert store.ingest(trace_of("twice", at_ms=0, spans=2)) == 2
    assert store.ingest(trace_of("twice", at_ms=0, spans=3)) == 1
    assert [t.span_count for t in store.list()] == [3]


def test_age_retention_drops_whole_traces_that_ended_long_ago(tmp_path: Path) -> None:
    now = [0.0]
    store = TraceStore.open(
        tmp_path / "traces.db", retention=Retention(max_age=60), clock=lambda: now[0]
    )
    store.ingest(trace_of("old", at_ms=0, spans=2))
    now[0] = store.list()[0].start_ns / SECOND + 61
    store.ingest(trace_of("new", at_ms=61_000))
    assert [t.root_name for t in store.list()] == ["new"]
    assert store.get(trace_id("old")) is None
    assert store.status().spans == 1


def test_count_retention_drops_the_oldest_traces_first(tmp_path: Path) -> None:
    store = TraceStore.open(tmp_path / "traces.db", retention=Retention(max_spans=5))
    for at, name in enumerate(["t1", "t2", "t3"]):
        store.ingest(trace_of(name, at_ms=at * 100, spans=3))
    assert [t.root_name for t in store.list()] == ["t3"]
    store.ingest(trace_of("t4", at_ms=400, spans=2))
    assert [t.root_name for t in store.list()] == ["t4", "t3"]
    assert store.status().spans == 5


def test_the_cursor_and_the_lost_spans_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = TraceStore.open(path)
    store.ingest(trace_of("kept", at_ms=0), seq=7)
    store.ingest(batch(dropped=4), seq=8)
    store.close()
    again = TraceStore.open(path)
    status = again.status()
    assert (status.cursor, status.dropped_spans, status.traces) == (8, 4, 1)
    assert again.cursor() == 8


def test_list_filters_and_limits(store: TraceStore) -> None:
    store.ingest(trace_of("x1", at_ms=0, run__id="r1", session__id="s1"))
    store.ingest(trace_of("x2", at_ms=10, run__id="r2", session__id="s1"))
    store.ingest(trace_of("x3", at_ms=20, run__id="r3", session__id="s2"))
    assert [t.root_name for t in store.list(session_id="s1")] == ["x2", "x1"]
    assert [t.root_name for t in store.list(run_id="r3")] == ["x3"]
    assert [t.root_name for t in store.list(limit=2)] == ["x3", "x2"]


def test_a_file_of_another_schema_version_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    TraceStore.open(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = 9 WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 9; this tackroom reads version 1"):
        TraceStore.open(path)


def test_a_file_that_is_no_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    path.write_text("not sqlite " * 100)
    with pytest.raises(StoreError, match="not a usable SQLite file"):
        TraceStore.open(path)


def test_a_forgotten_session_loses_its_traces_and_refuses_late_spans(store: TraceStore) -> None:
    store.ingest(trace_of("gone1", at_ms=0, spans=2, session__id="gone"))
    store.ingest(trace_of("kept1", at_ms=10, spans=2, session__id="kept"))
    late = span(trace_id("gone1"), "9", parent="1", start_ms=5, end_ms=6)

    assert store.forget_session("gone") == 2
    assert store.forget_session("gone") == 0
    store.ingest(batch(late))  # a span of the deleted trace still in flight
    store.ingest(trace_of("gone2", at_ms=20, session__id="gone"))

    assert store.list(session_id="gone") == []
    assert store.get(trace_id("gone1").rjust(32, "0")) is None
    assert [t.root_name for t in store.list()] == ["kept1"]
