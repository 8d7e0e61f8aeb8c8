"""A trace context kept and taken up again, and work done outside any trace.

- :func:`trace_headers` gives the trace context in force as W3C headers, to keep with a record;
  :func:`in_trace` runs code in a kept context again. A run keeps its own at its start, so the
  part of it that resumes after a pause (an approval, an abort, a restart) joins its trace,
  whoever wakes it.
- :func:`untraced` runs code under a parent that is not sampled: nothing it calls is recorded
  (reading a console page makes no trace).

:data:`PROPAGATOR` is the one propagation format of the engine: W3C ``traceparent`` and
``baggage`` (:mod:`tackroom.engine.tracing` carries them on every message).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import context, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["PROPAGATOR", "in_trace", "trace_headers", "untraced"]

PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])


def trace_headers() -> dict[str, str] | None:
    """The trace context in force as W3C headers (``None`` outside any span: tracing off, or
    none recorded)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    PROPAGATOR.inject(carrier)
    return carrier or None


@contextmanager
def in_trace(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Run the body in the trace ``headers`` carry (from :func:`trace_headers`): what it calls,
    enqueues or writes continues that trace, under the span that was current then. Free for
    ``None``."""
    if not headers:
        yield
        return
    token = context.attach(PROPAGATOR.extract(headers, context=context.get_current()))
    try:
        yield
    finally:
        context.detach(token)


@contextmanager
def untraced() -> Iterator[None]:
    """Run the body under a parent that is not sampled: the spans of what it calls, in this
    process or in another (its ``traceparent`` says "not sampled"), are recorded nowhere. Holds
    for providers with the default, parent-based sampler (the engine's own)."""
    parent = SpanContext(
        random.getrandbits(128) or 1,
        random.getrandbits(64) or 1,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.DEFAULT),
    )
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
    try:
        yield
    finally:
        context.detach(token)
