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
- ``tackroom.lifecycle`` when made inside a turn's step in this process (``THINKING``:
  :mod:`tackroom.kit.lifecycle`);
- always ``tackroom.retry_count``; each retry is an event ``tackroom.retry`` (its error kind and
  delay), a switch to the fallback model an event ``tackroom.fallback``.

With tracing off there is no tracer in force and the span is a no-op object: no attribute is
computed.

The span of a tool call, :func:`tool_call_span`, is made by the caller (the orchestrator) around
the call and its retries: ``"execute_tool {name}"`` (``execute_tool calc__add``), kind
``INTERNAL``, ``gen_ai.operation.name`` = ``execute_tool``, ``gen_ai.tool.name`` (the name the
model called), ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` = ``function``,
``tackroom.function_id``, ``tackroom.lifecycle`` (``ACTING``); a result that is an error sets
status ``ERROR`` and ``error.type`` (the result's ``details.error``, else ``tool_error``); a
result from a source nobody vouches for (its label's source ``untrusted``, docs/injection.md) sets
``tackroom.result.source`` = ``untrusted`` and ``tackroom.result.origins`` (function ids and
files it came from, never its content). The tool's own invocation makes no span (the caller's
stands for it, see :func:`tackroom.engine.tracing.caller_span_for`), unless tracing keeps
``spans: all``.

Both carry what happened (:mod:`tackroom.kit.summaries`): ``tackroom.input.summary`` (the
request's last turn; the call's arguments) and ``tackroom.output.summary`` (the answer, its
calls or its error; the result), cut to ``tracing.summaries.max_chars`` and scrubbed of secrets,
and ``gen_ai.conversation.id`` (the session). A status message or a retry's message is scrubbed
the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tackroom.contracts.messages import AssistantMessage, FunctionResultMessage, Usage
from tackroom.contracts.provider import request_field
from tackroom.engine.tracing import caller_span_for, current_tracer
from tackroom.kit.lifecycle import span_attributes as lifecycle_attributes
from tackroom.kit.summaries import INPUT, OUTPUT, Summarizer, summarizer

__all__ = ["FINISH_REASONS", "ModelCallSpan", "ToolCallSpan", "model_call_span", "tool_call_span"]

FINISH_REASONS: dict[str, str] = {"end": "stop", "function_call": "tool_calls"}
"""Stop reasons renamed to the values GenAI backends know; others are kept as they are."""


class ModelCallSpan:
    """What a provider tells the span of one call; every method is free with tracing off."""

    def __init__(self, span: Span | None, summaries: Summarizer | None = None) -> None:
        self._span = span
        self._summaries = summaries
        self.retries = 0

    @property
    def summarizing(self) -> bool:
        """Whether :meth:`answered` writes an output summary (worth building ``message``)."""
        return self._span is not None and self._summaries is not None and self._summaries.enabled

    def retrying(self, kind: str, message: str, *, delay: float) -> None:
        self.retries += 1
        if self._span is not None:
            self._span.add_event(
                "tackroom.retry",
                {
                    "error.type": kind,
                    "tackroom.retry.delay_s": delay,
                    "message": _scrubbed(self._summaries, message, 500),
                },
            )

    def falling_back(self, model: str) -> None:
        if self._span is not None:
            self._span.add_event("tackroom.fallback", {"gen_ai.request.model": model})

    def answered(
        self,
        *,
        model: str,
        stop_reason: str,
        usage: Usage,
        message: AssistantMessage | None = None,
    ) -> None:
        span = self._span
        if span is None:
            return
        if message is not None and self._summaries is not None and self._summaries.enabled:
            span.set_attribute(OUTPUT, self._summaries.model_output(message))
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
        span.set_status(Status(StatusCode.ERROR, _scrubbed(self._summaries, message, 1000)))
        span.set_attribute("error.type", kind)
        span.set_attribute("tackroom.retry_count", self.retries)
        if self._summaries is not None and self._summaries.enabled:
            span.set_attribute(OUTPUT, self._summaries.failure(kind, message))
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
    request: Any = None,
) -> Iterator[ModelCallSpan]:
    """The span of one model call (a no-op object when no tracer is in force); ``request`` (a
    ``ProviderRequest`` or its JSON) gives the input summary and ``gen_ai.conversation.id``."""
    tracer = current_tracer()
    if tracer is None:
        yield ModelCallSpan(None)
        return
    summaries = summarizer()
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
    attributes.update(lifecycle_attributes())
    if request is not None:
        attributes.update(_request_attributes(summaries, request))
    with tracer.start_as_current_span(
        f"{operation} {model}".strip(), kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield ModelCallSpan(span, summaries)


class ToolCallSpan:
    """What the caller tells the span of one tool call; free with tracing off."""

    def __init__(self, span: Span | None, summaries: Summarizer | None = None) -> None:
        self._span = span
        self._summaries = summaries

    def finished(self, result: FunctionResultMessage) -> None:
        span = self._span
        if span is None:
            return
        if self._summaries is not None and self._summaries.enabled:
            span.set_attribute(OUTPUT, self._summaries.tool_output(result))
        label = result.label
        if label is not None and label.untrusted:
            span.set_attribute("tackroom.result.source", label.source)
            span.set_attribute("tackroom.result.origins", list(label.origins))
        if not result.is_error:
            return
        details = result.details
        code = details.get("error") if isinstance(details, dict) else None
        text = " ".join(getattr(block, "text", "") for block in result.content).strip()
        status = _scrubbed(self._summaries, text, 1000)
        span.set_status(Status(StatusCode.ERROR, status or "the call failed"))
        span.set_attribute("error.type", code if isinstance(code, str) else "tool_error")


@contextmanager
def tool_call_span(
    *,
    name: str,
    call_id: str,
    function_id: str,
    arguments: Mapping[str, Any] | None = None,
    session_id: str | None = None,
) -> Iterator[ToolCallSpan]:
    """The span of one call of the tool ``name`` (``function_id`` on the bus); the function's
    invocation inside the body opens no span of its own. ``arguments`` give the input summary,
    ``session_id`` the ``gen_ai.conversation.id``."""
    tracer = current_tracer()
    if tracer is None:
        yield ToolCallSpan(None)
        return
    summaries = summarizer()
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "tackroom.function_id": function_id,
        **lifecycle_attributes(),
    }
    if session_id:
        attributes["gen_ai.conversation.id"] = session_id
    if arguments is not None and summaries is not None and summaries.enabled:
        attributes[INPUT] = summaries.tool_input(arguments)
    with (
        tracer.start_as_current_span(
            f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes
        ) as span,
        caller_span_for(function_id),
    ):
        yield ToolCallSpan(span, summaries)


def _request_attributes(summaries: Summarizer | None, request: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    session = request_field(request, "session_id")
    if isinstance(session, str) and session:
        attributes["gen_ai.conversation.id"] = session
    if summaries is not None and summaries.enabled:
        attributes[INPUT] = summaries.model_input(request)
    return attributes


def _scrubbed(summaries: Summarizer | None, text: str, limit: int) -> str:
    """A message a span shows, with secrets scrubbed (as summaries are) and cut to ``limit``."""
    return text[:limit] if summaries is None else summaries.text(text, limit=limit)
