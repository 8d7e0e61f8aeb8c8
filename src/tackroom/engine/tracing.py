"""OpenTelemetry for the engine: one span per invocation, created by the runtime.

Workers write no tracing code. A backend calls :meth:`EngineTracer.capture` where a message is
produced (enqueue, state write, append) and :meth:`EngineTracer.invocation` where a handler runs;
the W3C ``traceparent`` and ``baggage`` headers travel in between. Baggage keys ``session.id``,
``run.id`` and ``message.id`` are taken from the payload (``session_id`` / ``run_id`` /
``message_id`` fields) and merged into the baggage already in force, never replacing other entries.

With tracing off the engine holds no ``EngineTracer`` at all, so the off path costs one ``None``
check per call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from opentelemetry import baggage, context, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic import BaseModel

from tackroom.extras import missing_extra

if TYPE_CHECKING:  # the SDK loads only when tracing is on (it costs ~45 ms to import)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "BAGGAGE_FROM_PAYLOAD",
    "EngineTracer",
    "Headers",
    "TracingConfig",
    "build_tracer_provider",
]

Headers = dict[str, str]

BAGGAGE_FROM_PAYLOAD: Mapping[str, str] = {
    "session_id": "session.id",
    "run_id": "run.id",
    "message_id": "message.id",
}

_PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])


@dataclass(frozen=True, slots=True)
class TracingConfig:
    """``exporter``: ``none`` (off, free), ``console``, or ``otlp`` (HTTP, to ``endpoint``)."""

    exporter: Literal["none", "console", "otlp"] = "none"
    endpoint: str | None = None
    service_name: str = "tackroom"


def build_tracer_provider(
    config: TracingConfig, *, exporter: SpanExporter | None = None
) -> TracerProvider | None:
    """A provider for ``config``, or ``None`` when tracing is off. ``exporter`` overrides it.

    The engine itself needs only ``opentelemetry-api``; a provider (the SDK) and the OTLP
    exporter come with the ``otel`` extra, and without it this raises
    :class:`~tackroom.extras.MissingExtra` saying ``pip install 'tackroom[otel]'``."""
    if exporter is None and config.exporter == "none":
        return None
    needed_by = f"exporting traces (tracing.exporter: {config.exporter})"
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        if exporter is None:
            if config.exporter == "console":
                exporter = ConsoleSpanExporter()
            else:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )

                exporter = (
                    OTLPSpanExporter(endpoint=config.endpoint)
                    if config.endpoint
                    else OTLPSpanExporter()
                )
    except ModuleNotFoundError as exc:
        problem = missing_extra(exc, needed_by=needed_by)
        if problem is None:
            raise
        raise problem from exc
    provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _payload_baggage(payload: Any) -> list[tuple[str, str]]:
    if isinstance(payload, BaseModel):  # a request passed by reference in-process
        fields = {name: getattr(payload, name, None) for name in BAGGAGE_FROM_PAYLOAD}
    elif isinstance(payload, dict):
        fields = payload
    else:
        return []
    found: list[tuple[str, str]] = []
    for field_name, baggage_key in BAGGAGE_FROM_PAYLOAD.items():
        value = fields.get(field_name)
        if isinstance(value, str) and value:
            found.append((baggage_key, value))
    return found


class EngineTracer:
    """Span and propagation helpers bound to one tracer provider."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self._tracer = provider.get_tracer("tackroom.engine")

    def capture(self, payload: Any = None) -> Headers:
        """Headers carrying the current trace context and baggage (merged with the payload's)."""
        ctx = context.get_current()
        for key, value in _payload_baggage(payload):
            ctx = baggage.set_baggage(key, value, context=ctx)
        carrier: Headers = {}
        _PROPAGATOR.inject(carrier, context=ctx)
        return carrier

    @contextmanager
    def invocation(
        self,
        function_id: str,
        kind: str,
        payload: Any,
        *,
        headers: Mapping[str, str] | None = None,
        attributes: Mapping[str, str | int] | None = None,
    ) -> Iterator[Span]:
        """Run the body inside the span of one invocation of ``function_id``.

        ``headers`` (from :meth:`capture` on the producing side) give the parent and baggage; with
        none, the caller's current context is the parent (an in-process trigger).
        """
        ctx = _PROPAGATOR.extract(headers) if headers is not None else context.get_current()
        for key, value in _payload_baggage(payload):
            ctx = baggage.set_baggage(key, value, context=ctx)
        span_kind = SpanKind.SERVER if kind == "trigger" else SpanKind.CONSUMER
        span = self._tracer.start_span(f"{kind} {function_id}", context=ctx, kind=span_kind)
        span.set_attribute("tackroom.function_id", function_id)
        span.set_attribute("tackroom.invocation.kind", kind)
        for baggage_key, baggage_value in baggage.get_all(ctx).items():
            if baggage_key in BAGGAGE_FROM_PAYLOAD.values():
                span.set_attribute(baggage_key, str(baggage_value))
        if attributes:
            for attr_key, attr_value in attributes.items():
                span.set_attribute(attr_key, attr_value)
        token = context.attach(trace.set_span_in_context(span, ctx))
        try:
            yield span
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.record_exception(exc)
            raise
        finally:
            context.detach(token)
            span.end()
