"""The ``bus`` span exporter: finished spans appended to an engine stream a trace store reads.

Every process of a harness (one on the embedded engine, several on NATS) ships its spans the
same way: :class:`BusSpanProcessor` queues each finished span (bounded: when the queue is full the
span is dropped and counted, never waited for), and a task of its own appends them in batches to
the stream ``traces::spans``, group ``spans`` — at most ``batch_size`` spans a record, at least
every ``flush_interval`` seconds while spans wait. A turn never waits on it: ``on_end`` takes a
lock for a list append, and the appends run on the task.

It never recurses: the appends run in an empty context (no span, no baggage), so they start no
trace, and the spans of the trace store's own functions (ids under ``traces::``, the ones a store
serves and the ones it is triggered on) are not shipped.

A record is ``{"schema_version": 1, "dropped": N, "spans": [...]}``: ``dropped`` counts the spans
this process lost since its previous record (queue full, or an append that failed), each span as
:func:`span_record` gives it — the shape ``tackroom.contracts.traces.SpanBatch`` validates.

A host attaches the processor to its engine once the engine is started (:meth:`attach`) and
detaches it before closing the engine (:meth:`detach`, which ships what is still queued).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode

if TYPE_CHECKING:
    from tackroom.engine.protocol import Engine

__all__ = [
    "BATCH_SCHEMA_VERSION",
    "MAX_ATTRIBUTE_CHARS",
    "SPANS_GROUP",
    "SPANS_STREAM",
    "STORE_FUNCTION_PREFIX",
    "BusSpanProcessor",
    "span_record",
]

SPANS_STREAM = "traces::spans"
SPANS_GROUP = "spans"
BATCH_SCHEMA_VERSION = 1
STORE_FUNCTION_PREFIX = "traces::"
MAX_ATTRIBUTE_CHARS = 8192
"""A longer string attribute (a stack trace, say) is cut to this many characters."""

_log = logging.getLogger("tackroom.tracing")


def _value(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= MAX_ATTRIBUTE_CHARS else value[:MAX_ATTRIBUTE_CHARS] + "…"
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Sequence):
        return [_value(item) for item in value]
    return str(value)


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {} if not attributes else {key: _value(value) for key, value in attributes.items()}


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """One finished span as JSON: ids in lowercase hex, times in ns since the epoch, status
    ``ok`` or ``error`` (OpenTelemetry's ``unset`` reads as ``ok``)."""
    context, parent = span.context, span.parent
    status = span.status
    service = span.resource.attributes.get("service.name") if span.resource else None
    return {
        "trace_id": format(context.trace_id, "032x") if context else "0" * 32,
        "span_id": format(context.span_id, "016x") if context else "0" * 16,
        "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
        "name": span.name,
        "kind": span.kind.name.lower(),
        "start_ns": span.start_time or 0,
        "end_ns": span.end_time or span.start_time or 0,
        "status": "error" if status.status_code is StatusCode.ERROR else "ok",
        "status_message": status.description or None,
        "attributes": _attributes(span.attributes),
        "events": [
            {
                "name": event.name,
                "time_ns": event.timestamp,
                "attributes": _attributes(event.attributes),
            }
            for event in span.events
        ],
        "service_name": service if isinstance(service, str) else "",
    }


def _is_store_span(span: ReadableSpan) -> bool:
    function_id = (span.attributes or {}).get("tackroom.function_id")
    return isinstance(function_id, str) and function_id.startswith(STORE_FUNCTION_PREFIX)


class BusSpanProcessor(SpanProcessor):
    """Ships finished spans to ``traces::spans`` through the engine it is attached to."""

    def __init__(
        self, *, queue_size: int = 4096, batch_size: int = 256, flush_interval: float = 1.0
    ) -> None:
        self.queue_size = queue_size
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.dropped = 0
        """Spans lost in this process so far (queue full, failed append, after shutdown)."""
        self.shipped = 0
        self._unreported = 0
        self._queue: list[ReadableSpan] = []
        self._lock = threading.Lock()
        self._closed = False
        self._engines: list[Engine] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._wake = asyncio.Event()
        self._shipping = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    # -- the SDK's side (any thread) ---------------------------------------------------------
    def on_end(self, span: ReadableSpan) -> None:
        if _is_store_span(span):
            return
        with self._lock:
            if self._closed or len(self._queue) >= self.queue_size:
                self.dropped += 1
                self._unreported += 1
                return
            self._queue.append(span)
            full = len(self._queue) >= self.batch_size
        if full:
            self._signal()

    def _signal(self) -> None:
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._thread:
            self._wake.set()
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the spans wait
                loop.call_soon_threadsafe(self._wake.set)

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            self.dropped += len(self._queue)
            self._queue.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wakes the shipping task; it cannot wait for the append from the loop's own thread
        (``await flush()`` does)."""
        self._signal()
        return True

    # -- the host's side (the event loop) ----------------------------------------------------
    async def attach(self, engine: Engine) -> None:
        """Ship through ``engine`` (started) from now on; the first attach starts the task."""
        self._engines.append(engine)
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._wake, self._shipping = asyncio.Event(), asyncio.Lock()  # bound to this loop
        self._task = self._loop.create_task(
            self._run(), name="tracing: ship spans to the bus", context=contextvars.Context()
        )

    async def detach(self, engine: Engine) -> None:
        """Ship what is queued, then stop using ``engine`` (the last detach stops the task)."""
        if engine not in self._engines:
            return
        if self._engines[-1] is engine:
            await self._ship_in_empty_context()
        self._engines.remove(engine)
        if self._engines or self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        self._loop = self._thread = None

    async def flush(self) -> None:
        """Ship every span queued now (tests, and a host before it closes its engine)."""
        await self._ship_in_empty_context()

    async def _ship_in_empty_context(self) -> None:
        task = asyncio.get_running_loop().create_task(self._ship(), context=contextvars.Context())
        await task

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.flush_interval)
            self._wake.clear()
            await self._ship()

    def _take(self) -> tuple[list[ReadableSpan], int]:
        with self._lock:
            batch = self._queue[: self.batch_size]
            del self._queue[: self.batch_size]
            dropped, self._unreported = self._unreported, 0
        return batch, dropped

    async def _ship(self) -> None:
        async with self._shipping:
            while self._engines:
                batch, dropped = self._take()
                if not batch and not dropped:
                    return
                record = {
                    "schema_version": BATCH_SCHEMA_VERSION,
                    "dropped": dropped,
                    "spans": [span_record(span) for span in batch],
                }
                try:
                    await self._engines[-1].append(SPANS_STREAM, SPANS_GROUP, record)
                except asyncio.CancelledError:
                    with self._lock:
                        self.dropped += len(batch)
                    raise
                except Exception as exc:
                    with self._lock:
                        self.dropped += len(batch)
                        self._unreported += dropped + len(batch)
                    if not self._failing:  # one line a failure streak, not one a second
                        _log.warning("tracing: spans not shipped to the bus: %s", exc)
                    self._failing = True
                    return
                self._failing = False
                self.shipped += len(batch)
