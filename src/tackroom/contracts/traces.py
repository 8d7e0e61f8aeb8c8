"""The public face of a trace store (``traces::*``): the span stream it reads and its functions.

Every process with ``tracing.exporters: [bus]`` appends its finished spans to the stream
:data:`SPANS` (``traces::spans``, group ``spans``) in :class:`SpanBatch` records. A trace store
reads that stream and answers:

- ``traces::list`` (:class:`ListRequest` → :class:`TraceList`): recent traces, newest first,
  optionally those of one session or one run, and the same traces grouped by session;
- ``traces::get`` (:class:`GetRequest` → :class:`TraceDetail`): every span of one trace;
- ``traces::status`` (:class:`StatusRequest` → :class:`StoreStatus`): what the store holds.

A trace's run and session are taken from any of its spans (attributes ``run.id`` /
``session.id``, which the engine sets from the payloads, or ``tackroom.run_id`` /
``tackroom.session_id``). Spans of functions under ``traces::`` are never shipped, so a store
never sees its own work. Failures: ``not_found`` (no such trace), ``invalid_request``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tackroom.contracts.bus import Function, Stream

__all__ = [
    "GET",
    "LIST",
    "NOT_FOUND",
    "RUN_ATTRIBUTES",
    "SCHEMA_VERSION",
    "SESSION_ATTRIBUTES",
    "SPANS",
    "SPANS_GROUP",
    "STATUS",
    "GetRequest",
    "ListRequest",
    "SessionTraces",
    "SpanBatch",
    "SpanEvent",
    "SpanRecord",
    "SpanStatus",
    "StatusRequest",
    "StoreStatus",
    "TraceDetail",
    "TraceId",
    "TraceList",
    "TraceSummary",
]

SCHEMA_VERSION = 1
SPANS_GROUP = "spans"
"""The one group of ``traces::spans`` every process appends to."""
NOT_FOUND = "not_found"
RUN_ATTRIBUTES = ("run.id", "tackroom.run_id")
"""Span attributes naming the run a span belongs to, in the order a store reads them."""
SESSION_ATTRIBUTES = ("session.id", "tackroom.session_id")

TraceId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
SpanId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]
SpanStatus = Literal["ok", "error"]


class _Model(BaseModel):
    # Built at first use, not at import.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class _Record(BaseModel):
    # Stream records from newer exporters may carry more fields: a store keeps what it knows.
    model_config = ConfigDict(extra="ignore", defer_build=True)


# -- the stream ------------------------------------------------------------------------------


class SpanEvent(_Record):
    name: str
    time_ns: int
    attributes: dict[str, Any] = Field(default_factory=dict)


class SpanRecord(_Record):
    """One finished span: ids in lowercase hex, times in nanoseconds since the epoch."""

    trace_id: TraceId
    span_id: SpanId
    parent_span_id: SpanId | None = None
    name: str
    kind: str = "internal"
    start_ns: int
    end_ns: int
    status: SpanStatus = "ok"
    status_message: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    events: list[SpanEvent] = Field(default_factory=list)
    service_name: str = ""


class SpanBatch(_Record):
    """One record of ``traces::spans``: spans of one process; ``dropped`` counts the spans that
    process lost since its previous record (its queue was full, an append failed)."""

    schema_version: int = SCHEMA_VERSION
    dropped: int = Field(default=0, ge=0)
    spans: list[SpanRecord] = Field(default_factory=list)


SPANS = Stream[SpanBatch]("traces::spans", SpanBatch)


# -- the functions ---------------------------------------------------------------------------


class _Versioned(_Model):
    """A function's request or reply: it carries the contract's ``schema_version``."""

    schema_version: int = SCHEMA_VERSION


class ListRequest(_Versioned):
    session_id: str | None = Field(default=None, description="Only the traces of this session.")
    run_id: str | None = Field(default=None, description="Only the traces of this run.")
    limit: int = Field(default=50, ge=1, le=1000, description="Traces at most, newest first.")


class TraceSummary(_Model):
    trace_id: TraceId
    run_id: str | None = None
    session_id: str | None = None
    root_name: str
    start_ns: int
    duration_ms: float
    span_count: int
    error_count: int = 0
    status: SpanStatus


class SessionTraces(_Model):
    """The listed traces of one session (``None``: traces of no session), newest first."""

    session_id: str | None
    trace_ids: list[TraceId]
    run_ids: list[str] = Field(default_factory=list)


class TraceList(_Versioned):
    traces: list[TraceSummary]
    sessions: list[SessionTraces] = Field(
        default_factory=list,
        description="The same traces grouped by session, the session of the newest first.",
    )


class GetRequest(_Versioned):
    trace_id: TraceId


class TraceDetail(_Versioned):
    """Every span of a trace, by start time."""

    trace_id: TraceId
    run_id: str | None = None
    session_id: str | None = None
    spans: list[SpanRecord]


class StatusRequest(_Versioned):
    pass


class StoreStatus(_Versioned):
    traces: int
    spans: int
    dropped_spans: int = Field(description="Spans the exporters reported lost, in total.")
    oldest_start_ns: int | None = None
    cursor: int = Field(description="The last record of traces::spans the store has read.")


LIST = Function[ListRequest, TraceList](
    "traces::list", ListRequest, TraceList, description="Recent traces, newest first."
)
GET = Function[GetRequest, TraceDetail](
    "traces::get", GetRequest, TraceDetail, description="Every span of one trace."
)
STATUS = Function[StatusRequest, StoreStatus](
    "traces::status", StatusRequest, StoreStatus, description="What the trace store holds."
)
