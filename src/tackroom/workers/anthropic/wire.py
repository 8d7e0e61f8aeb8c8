"""The Messages API over the official ``anthropic`` SDK: one streamed attempt into a sink.

This module imports the SDK; the worker imports it only when it starts. The SDK's own retries
are off (``max_retries=0``): the service retries by error class. Raw stream events
(``messages.create(stream=True)``) map to:

- ``content_block_start``: ``tool_use`` announces a call (id, name), ``redacted_thinking``
  keeps its opaque data, a block that starts with text or thinking in it passes that on;
- ``content_block_delta``: ``text_delta`` → text, ``thinking_delta`` → thinking,
  ``signature_delta`` → the thinking block's signature, ``input_json_delta`` → call arguments
  (each keyed by the block ``index``, so interleaved blocks stay apart);
- ``message_start`` / ``message_delta`` usage → ``input_tokens`` (not cached),
  ``cache_read_input_tokens`` → cache reads, ``cache_creation_input_tokens`` → cache writes,
  ``output_tokens``;
- stop reasons: ``end_turn`` / ``stop_sequence`` / ``pause_turn`` → end, ``max_tokens`` and
  ``model_context_window_exceeded`` → length, ``tool_use`` → function_call, ``refusal`` → a
  ``permanent`` error.

An ``output_format`` becomes ``output_config.format`` (``{type: json_schema, schema}``), the
schema as the API takes it (``anthropic.transform_schema``: every object closed, keywords it
does not enforce moved into descriptions — the orchestrator still validates the answer against
the original); a schema it cannot take is written into the system prompt instead.

A stream without ``message_stop`` (and no stop reason) ended early; an in-stream ``error``
event (e.g. ``overloaded_error``) is classified like an HTTP error of its type. A failure
after the stop reason arrived keeps the finished answer.
"""

from __future__ import annotations

import json
import logging
from typing import Any, cast

import anthropic
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStreamEvent,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
)

from tackroom.contracts.messages import StopReason
from tackroom.contracts.provider import OutputFormat
from tackroom.kit.output import answer_format
from tackroom.kit.providers.clients import KeyedClients, end_stream, read_to_stop
from tackroom.kit.providers.service import WireCall
from tackroom.kit.providers.sink import StreamSink
from tackroom.workers.anthropic.config import AnthropicProfile
from tackroom.workers.anthropic.convert import message_params

__all__ = ["AnthropicAdapter"]

_log = logging.getLogger("tackroom.providers")

_STOP: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "pause_turn": "end",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "function_call",
}
_REFUSALS = {"refusal": "the model declined to answer (refusal)"}


def _constrain(params: dict[str, Any], output: OutputFormat) -> None:
    """Ask for structured output (``output_config.format``), or, for a schema the API cannot
    take (or an SDK too old to convert it), put it in the system prompt."""
    transform = getattr(anthropic, "transform_schema", None)
    try:
        if transform is None:
            raise ValueError("this anthropic SDK has no transform_schema")
        schema = transform(output.json_schema)
    except (ValueError, TypeError, KeyError) as exc:
        _log.info("output schema %s sent in the prompt: %s", output.name, exc)
        text = answer_format(output.json_schema, name=output.name)
        params["system"] = [*params.get("system", []), {"type": "text", "text": text}]
        return
    extra = dict(params.get("extra_body") or {})
    config = extra.get("output_config")
    extra["output_config"] = {
        **(config if isinstance(config, dict) else {}),
        "format": {"type": "json_schema", "schema": schema},
    }
    params["extra_body"] = extra


def _record_usage(sink: StreamSink, usage: Any) -> None:
    sink.usage(
        input_tokens=getattr(usage, "input_tokens", None),
        output_tokens=getattr(usage, "output_tokens", None),
        cache_read_tokens=getattr(usage, "cache_read_input_tokens", None),
        cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None),
    )


class AnthropicAdapter:
    """One profile's SDK client (one copy per key, sharing the connection pool)."""

    def __init__(self, profile: AnthropicProfile) -> None:
        self._profile = profile
        self._clients = KeyedClients(
            anthropic.AsyncAnthropic, timeout=anthropic.Timeout, profile=profile
        )

    async def run(self, call: WireCall, sink: StreamSink) -> None:
        params = message_params(call.request, call.model, self._profile, call.info)
        if call.request.output_format is not None:
            _constrain(params, call.request.output_format)
        create: Any = self._clients.for_key(call.key).messages.create
        stream = cast("anthropic.AsyncStream[RawMessageStreamEvent]", await create(**params))
        sink.opened = True

        async def on_event(event: RawMessageStreamEvent) -> str | None:
            if isinstance(event, RawContentBlockDeltaEvent):
                await _read_delta(sink, event.index, event.delta)
            elif isinstance(event, RawContentBlockStartEvent):
                await _start_block(sink, event.index, event.content_block)
            elif isinstance(event, RawMessageStartEvent):
                _record_usage(sink, event.message.usage)
            elif isinstance(event, RawMessageDeltaEvent):
                _record_usage(sink, event.usage)
                return event.delta.stop_reason
            return None

        stop = await read_to_stop(stream, on_event)
        end_stream(sink, stop, reasons=_STOP, refusals=_REFUSALS)

    async def aclose(self) -> None:
        await self._clients.aclose()


async def _read_delta(sink: StreamSink, index: int, delta: Any) -> None:
    if isinstance(delta, TextDelta):
        await sink.text(delta.text, index)
    elif isinstance(delta, InputJSONDelta):
        await sink.call(index, arguments=delta.partial_json)
    elif isinstance(delta, ThinkingDelta):
        await sink.thinking(delta.thinking, index)
    elif isinstance(delta, SignatureDelta):
        await sink.thinking("", index, signature=delta.signature)


async def _start_block(sink: StreamSink, index: int, block: Any) -> None:
    kind = block.type
    if kind == "tool_use":
        raw = block.input
        arguments = json.dumps(raw, ensure_ascii=False) if raw else ""
        await sink.call(index, id=block.id, name=block.name, arguments=arguments)
    elif kind == "redacted_thinking":
        sink.redacted_thinking(block.data, index)
    elif kind == "thinking" and (block.thinking or block.signature):
        await sink.thinking(block.thinking, index, signature=block.signature or None)
    elif kind == "text" and block.text:
        await sink.text(block.text, index)
