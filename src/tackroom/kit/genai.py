"""One span per model call, with the OpenTelemetry GenAI semantic-convention attributes.

A provider worker wraps each call (all its retries and the fallback model) in
:func:`model_call_span`; the span is a child of the engine's span of the ``provider::…``
invocation, named ``"{operation} {model}"`` (``chat gpt-5-mini``), kind ``CLIENT``:

- ``gen_ai.operation.name``, ``gen_ai.provider.name`` (and the older ``gen_ai.system``),
  ``gen_ai.request.model``, ``gen_ai.request.max_tokens``, ``gen_ai.request.temperature``;
- answered: ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` (and
  ``cache_read`` / ``cache_creation`` input tokens when non-zero),
  ``gen_ai.response.finish_reasons``, ``tackroom.stop_reason``, ``tackroom.cost_usd``;
- failed: status ``ERROR`` with the message, ``error.type`` (the error kind: ``rate_limited``,
  ``transient``, ``auth``, ``context_overflow``, ``permanent``), ``http.response.status_code``
  when known;
- always ``tackroom.retry_count``; each retry is an event ``tackroom.retry`` (its error kind and
  delay), a switch to the fallback model an event ``tackroom.fallback``.

With tracing off there is no tracer in force and the span is a no-op object: no attribute is
computed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tackroom.contracts.messages import Usage
from tackroom.engine.tracing import current_tracer

__all__ = ["FINISH_REASONS", "ModelCallSpan", "model_call_span"]

FINISH_REASONS: dict[str, str] = {"end": "stop", "function_call": "tool_calls"}
"""Stop reasons renamed to the values GenAI backends know; others are kept as they are."""


class ModelCallSpan:
    """What a provider tells the span of one call; every method is free with tracing off."""

    def __init__(self, span: Span | None) -> None:
        self._span = span
        self.retries = 0

    def retrying(self, kind: str, message: str, *, delay: float) -> None:
        self.retries += 1
        if self._span is not None:
            self._span.add_event(
                "tackroom.retry",
                {"error.type": kind, "tackroom.retry.delay_s": delay, "message": message[:500]},
            )

    def falling_back(self, model: str) -> None:
        if self._span is not None:
            self._span.add_event("tackroom.fallback", {"gen_ai.request.model": model})

    def answered(self, *, model: str, stop_reason: str, usage: Usage) -> None:
        span = self._span
        if span is None:
            return
        attributes: dict[str, Any] = {
            "gen_ai.response.model": model,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.response.finish_reasons": [FINISH_REASONS.get(stop_reason, stop_reason)],
            "tackroom.stop_reason": stop_reason,
            "tackroom.cost_usd": usage.cost_usd,
            "tackroom.retry_count": self.retries,
        }
        if usage.cache_read_tokens:
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
        if usage.cache_write_tokens:
            attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
        span.set_attributes(attributes)

    def failed(self, kind: str, message: str, *, status: int | None = None) -> None:
        span = self._span
        if span is None:
            return
        span.set_status(Status(StatusCode.ERROR, message[:1000]))
        span.set_attribute("error.type", kind)
        span.set_attribute("tackroom.retry_count", self.retries)
        if status is not None:
            span.set_attribute("http.response.status_code", status)


@contextmanager
def model_call_span(
    *,
    provider: str,
    model: str,
    operation: str = "chat",
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> Iterator[ModelCallSpan]:
    """The span of one model call (a no-op object when no tracer is in force)."""
    tracer = current_tracer()
    if tracer is None:
        yield ModelCallSpan(None)
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": model,
    }
    if max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = max_tokens
    if temperature is not None:
        attributes["gen_ai.request.temperature"] = temperature
    with tracer.start_as_current_span(
        f"{operation} {model}".strip(), kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield ModelCallSpan(span)
