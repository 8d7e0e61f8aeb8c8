"""One span per model call and per tool call, with the OpenTelemetry GenAI semantic conventions.

A provider worker wraps each call (all its retries and the fallback model) in
:func:`model_call_span`; the span stands for the ``provider::…`` invocation (registered as a bus
hop, so the engine makes none: the span's parent is the caller's, the turn step's), named
``"{operation} {model}"`` (``chat gpt-5-mini``), kind ``CLIENT``:

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

The span of a tool call, :func:`tool_call_span`, is made by the caller (the orchestrator) around
the call and its retries: ``"execute_tool {name}"`` (``execute_tool calc__add``), kind
``INTERNAL``, ``gen_ai.operation.name`` = ``execute_tool``, ``gen_ai.tool.name`` (the name the
model called), ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` = ``function``,
``tackroom.function_id``; a result that is an error sets status ``ERROR`` and ``error.type`` (the
result's ``details.error``, else ``tool_error``). The tool's own invocation makes no span (the
caller's stands for it, see :func:`tackroom.engine.tracing.caller_span_for`), unless tracing keeps
``spans: all``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tackroom.contracts.messages import FunctionResultMessage, Usage
from tackroom.engine.tracing import caller_span_for, current_tracer

__all__ = ["FINISH_REASONS", "ModelCallSpan", "ToolCallSpan", "model_call_span", "tool_call_span"]

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


class ToolCallSpan:
    """What the caller tells the span of one tool call; free with tracing off."""

    def __init__(self, span: Span | None) -> None:
        self._span = span

    def finished(self, result: FunctionResultMessage) -> None:
        span = self._span
        if span is None or not result.is_error:
            return
        details = result.details
        code = details.get("error") if isinstance(details, dict) else None
        text = " ".join(getattr(block, "text", "") for block in result.content).strip()
        span.set_status(Status(StatusCode.ERROR, text[:1000] or "the call failed"))
        span.set_attribute("error.type", code if isinstance(code, str) else "tool_error")


@contextmanager
def tool_call_span(*, name: str, call_id: str, function_id: str) -> Iterator[ToolCallSpan]:
    """The span of one call of the tool ``name`` (``function_id`` on the bus); the function's
    invocation inside the body opens no span of its own."""
    tracer = current_tracer()
    if tracer is None:
        yield ToolCallSpan(None)
        return
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "tackroom.function_id": function_id,
    }
    with (
        tracer.start_as_current_span(
            f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes
        ) as span,
        caller_span_for(function_id),
    ):
        yield ToolCallSpan(span)
