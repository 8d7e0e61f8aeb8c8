"""OpenTelemetry for the engine: a span per invocation, created by the runtime — bus hops excepted.

Workers write no tracing code. A backend calls :meth:`EngineTracer.capture` where a message is
produced (enqueue, state write, append) and :meth:`EngineTracer.invocation` where a handler runs;
the W3C ``traceparent`` and ``baggage`` headers travel in between. Baggage keys ``session.id``,
``run.id`` and ``message.id`` are taken from the payload (``session_id`` / ``run_id`` /
``message_id`` fields) and merged into the baggage already in force, never replacing other entries.

Which invocations make a span (``spans``, :data:`SpanMode`): with ``steps`` (the default) a trace
holds the steps of the work, not every bus hop. Two kinds of invocation open no span of their own:

- a function registered with ``hop=True`` (``register_function(..., hop=True)``, or a
  :class:`~tackroom.contracts.bus.Function` declared so): plumbing (a session read or append, an
  inbox peek), or a function whose own code makes the span that stands for the call (a provider's
  GenAI span ``chat <model>``, the orchestrator's ``turn.step <state>`` spans);
- an invocation its caller made the span for: :func:`caller_span_for` (the orchestrator's
  ``execute_tool <name>`` span stands for the tool's invocation).

Such an invocation still runs in the trace: the parent context and baggage it received are in
force, so every span made inside it, and every call or message it produces, joins the caller's
trace. ``spans: all`` gives every invocation its span again (a bus being debugged).

With tracing off the engine holds no ``EngineTracer`` at all, so the off path costs one ``None``
check per call.

Summaries: each invocation's context carries the tracer's :class:`SummaryConfig` (from the
``TracingConfig`` its provider was built with), read by :func:`current_summaries` where a model
or tool span is made (:mod:`tackroom.kit.genai`).

Exporters (several at once): ``console``, ``otlp`` (OTLP/HTTP; ``endpoint`` may be a base URL,
``/v1/traces`` is appended to an empty path) and ``bus``, which appends finished spans to the
engine stream a trace store reads (:mod:`tackroom.engine.span_bus`; a host attaches it to its
engine once that is started: :func:`span_bus`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import baggage, context, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from pydantic import BaseModel

from tackroom.engine.trace_context import PROPAGATOR as _PROPAGATOR
from tackroom.extras import missing_extra

if TYPE_CHECKING:  # the SDK loads only when tracing is on (it costs ~45 ms to import)
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from tackroom.engine.span_bus import BusSpanProcessor

__all__ = [
    "BAGGAGE_FROM_PAYLOAD",
    "CALLER_SPAN_BAGGAGE",
    "DEFAULT_SUMMARY_CHARS",
    "EngineTracer",
    "ExporterName",
    "Headers",
    "SpanMode",
    "SummaryConfig",
    "TracingConfig",
    "build_tracer_provider",
    "caller_span_for",
    "current_summaries",
    "current_tracer",
    "otlp_traces_url",
    "span_bus",
]

Headers = dict[str, str]

BAGGAGE_FROM_PAYLOAD: Mapping[str, str] = {
    "session_id": "session.id",
    "run_id": "run.id",
    "message_id": "message.id",
}

ExporterName = Literal["console", "otlp", "bus"]

SpanMode = Literal["steps", "all"]
"""``steps``: no span for a hop (see the module's docstring); ``all``: a span per invocation."""

CALLER_SPAN_BAGGAGE = "tackroom.span.by_caller"
"""Baggage naming the function whose next invocation the caller's span stands for (it is taken
out of the baggage by that invocation, so it never reaches the calls the handler makes)."""

_TRACER_KEY = context.create_key("tackroom-tracer")
_SUMMARIES_KEY = context.create_key("tackroom-span-summaries")
_SPAN_BUSES: weakref.WeakKeyDictionary[TracerProvider, BusSpanProcessor] = (
    weakref.WeakKeyDictionary()
)
_SUMMARIES: weakref.WeakKeyDictionary[TracerProvider, SummaryConfig] = weakref.WeakKeyDictionary()


DEFAULT_SUMMARY_CHARS = 1024
"""Characters of one span summary: a prompt's last turn or a tool's arguments read at a glance,
under the tightest attribute limit of the common backends (New Relic keeps 4,095 characters),
and two per span keep a 256-span bus record near half a megabyte."""


@dataclass(frozen=True, slots=True)
class SummaryConfig:
    """Input and output summaries on model and tool spans (``tracing.summaries``): on by
    default, each at most ``max_chars``, scrubbed by the redactor's patterns, ``patterns``
    (``(name, regex)`` pairs) and the values of the environment variables ``secret_env``
    (:mod:`tackroom.kit.summaries` does the work; the engine only carries the settings)."""

    enabled: bool = True
    max_chars: int = DEFAULT_SUMMARY_CHARS
    patterns: tuple[tuple[str, str], ...] = ()
    secret_env: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TracingConfig:
    """``exporter``: ``none`` (off, free), ``console``, ``otlp`` (HTTP, to ``endpoint``) or
    ``bus``; ``exporters`` names several at once and wins over ``exporter``. ``bus_*`` bound the
    bus exporter: spans queued at most (more are dropped and counted), spans per record, and
    seconds between two records. ``spans``: which invocations make spans (:data:`SpanMode`)."""

    exporter: Literal["none", "console", "otlp", "bus"] = "none"
    endpoint: str | None = None
    service_name: str = "tackroom"
    exporters: tuple[ExporterName, ...] = ()
    bus_queue_size: int = 4096
    bus_batch_size: int = 256
    bus_flush_interval: float = 1.0
    spans: SpanMode = "steps"
    summaries: SummaryConfig = SummaryConfig()

    def exporters_in_use(self) -> tuple[ExporterName, ...]:
        """The exporters this config turns on, each once (empty: tracing is off)."""
        chosen = self.exporters or (() if self.exporter == "none" else (self.exporter,))
        return tuple(dict.fromkeys(chosen))


def otlp_traces_url(endpoint: str) -> str:
    """``endpoint`` with ``/v1/traces`` appended when its path is empty or ``/`` (a collector's
    base URL, ``http://collector:4318``); a full path is kept as it is."""
    parts = urlsplit(endpoint)
    if parts.path not in ("", "/"):
        return endpoint
    return urlunsplit(parts._replace(path="/v1/traces"))


def build_tracer_provider(
    config: TracingConfig, *, exporter: SpanExporter | None = None
) -> TracerProvider | None:
    """A provider for ``config``, or ``None`` when tracing is off. ``exporter`` overrides the
    configured exporters.

    The engine itself needs only ``opentelemetry-api``; a provider (the SDK) and the OTLP
    exporter come with the ``otel`` extra, and without it this raises
    :class:`~tackroom.extras.MissingExtra` saying ``pip install 'tackroom[otel]'``."""
    names = config.exporters_in_use()
    if exporter is None and not names:
        return None
    needed_by = f"exporting traces (tracing.exporters: {', '.join(names) or 'given'})"
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        bus: BusSpanProcessor | None = None
        processors: list[SpanProcessor] = []
        if exporter is not None:
            processors.append(BatchSpanProcessor(exporter))
        else:
            bus = _bus_processor(config) if "bus" in names else None
            processors.extend(_exporting(name, config) for name in names if name != "bus")
    except ModuleNotFoundError as exc:
        problem = missing_extra(exc, needed_by=needed_by)
        if problem is None:
            raise
        raise problem from exc
    provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
    for processor in processors:
        provider.add_span_processor(processor)
    if bus is not None:
        provider.add_span_processor(bus)
        _SPAN_BUSES[provider] = bus
    _SUMMARIES[provider] = config.summaries
    return provider


def _bus_processor(config: TracingConfig) -> BusSpanProcessor:
    from tackroom.engine.span_bus import BusSpanProcessor

    return BusSpanProcessor(
        queue_size=config.bus_queue_size,
        batch_size=config.bus_batch_size,
        flush_interval=config.bus_flush_interval,
    )


def _exporting(name: ExporterName, config: TracingConfig) -> SpanProcessor:
    """A batching processor for the ``console`` or ``otlp`` exporter."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    if name == "console":
        return BatchSpanProcessor(ConsoleSpanExporter())
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = config.endpoint
    otlp = OTLPSpanExporter(endpoint=otlp_traces_url(endpoint)) if endpoint else OTLPSpanExporter()
    return BatchSpanProcessor(otlp)


def span_bus(provider: TracerProvider | None) -> BusSpanProcessor | None:
    """The bus exporter of a provider :func:`build_tracer_provider` built, if it has one."""
    return None if provider is None else _SPAN_BUSES.get(provider)


def current_summaries() -> SummaryConfig | None:
    """The span summary settings of the invocation in force (``None`` with tracing off: then
    nothing is summarised or scrubbed at all)."""
    summaries = context.get_value(_SUMMARIES_KEY)
    return summaries if isinstance(summaries, SummaryConfig) else None


def current_tracer() -> Tracer | None:
    """The tracer of the engine invocation in force (``None`` with tracing off): code inside a
    handler opens child spans with it (a model call's GenAI span, say)."""
    tracer = context.get_value(_TRACER_KEY)
    return tracer if isinstance(tracer, Tracer) else None


@contextmanager
def caller_span_for(function_id: str) -> Iterator[None]:
    """Calls of ``function_id`` made in the body are stood for by the caller's own span (the one
    in force): their invocation opens none (with ``spans: steps``). Free with tracing off.

    The mark travels as baggage, so it holds across processes; the invocation of
    ``function_id`` takes it out, and an invocation of another function leaves it unused."""
    if current_tracer() is None:
        yield
        return
    token = context.attach(baggage.set_baggage(CALLER_SPAN_BAGGAGE, function_id))
    try:
        yield
    finally:
        context.detach(token)


def _payload_baggage(payload: Any) -> list[tuple[str, str]]:
    if isinstance(payload, BaseModel):  # a request passed by reference in-process
        # Its fields, read from __dict__: a getattr of a field the model lacks costs ~2.5 µs.
        fields: Mapping[str, Any] = payload.__dict__
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


def _with_payload_baggage(ctx: context.Context, payload: Any) -> context.Context:
    """``ctx`` with the payload's baggage merged in (the same ``ctx`` when it holds it already)."""
    for key, value in _payload_baggage(payload):
        if baggage.get_baggage(key, ctx) != value:
            ctx = baggage.set_baggage(key, value, context=ctx)
    return ctx


class EngineTracer:
    """Span and propagation helpers bound to one tracer provider; ``spans`` says which
    invocations make spans (:data:`SpanMode`)."""

    def __init__(self, provider: TracerProvider, *, spans: SpanMode = "steps") -> None:
        self.provider = provider
        self.spans: SpanMode = spans
        self._tracer = provider.get_tracer("tackroom.engine")
        self.summaries = _SUMMARIES.get(provider) or SummaryConfig()
        """From the ``TracingConfig`` the provider was built with; a provider made otherwise
        (a test's recorder) gets the defaults."""

    def capture(self, payload: Any = None) -> Headers:
        """Headers carrying the current trace context and baggage (merged with the payload's)."""
        ctx = _with_payload_baggage(context.get_current(), payload)
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
        hop: bool = False,
    ) -> Iterator[Span | None]:
        """Run the body inside the span of one invocation of ``function_id`` — or, for a hop
        (``hop``, or a call its caller's span stands for) with ``spans: steps``, inside the
        received context without a span of its own (``None`` is yielded).

        ``headers`` (from :meth:`capture` on the producing side) give the parent and baggage; with
        none, the caller's current context is the parent (an in-process trigger).
        """
        current = context.get_current()
        ctx = _PROPAGATOR.extract(headers) if headers is not None else current
        ctx = _with_payload_baggage(ctx, payload)
        by_caller = baggage.get_baggage(CALLER_SPAN_BAGGAGE, ctx)
        if by_caller is not None:
            ctx = baggage.remove_baggage(CALLER_SPAN_BAGGAGE, ctx)
        if context.get_value(_TRACER_KEY, ctx) is not self._tracer:
            ctx = context.set_value(_TRACER_KEY, self._tracer, ctx)
            ctx = context.set_value(_SUMMARIES_KEY, self.summaries, ctx)
        if self.spans == "steps" and (hop or by_caller == function_id):
            if ctx is current:  # an in-process hop inside the same trace: nothing to change
                yield None
                return
            token = context.attach(ctx)
            try:
                yield None
            finally:
                context.detach(token)
            return
        with self._span(function_id, kind, ctx, attributes) as span:
            yield span

    @contextmanager
    def _span(
        self,
        function_id: str,
        kind: str,
        ctx: context.Context,
        attributes: Mapping[str, str | int] | None,
    ) -> Iterator[Span]:
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
