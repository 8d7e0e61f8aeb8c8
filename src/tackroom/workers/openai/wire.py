"""Chat Completions over the official ``openai`` SDK: one streamed attempt into a sink.

This module imports the SDK; the worker imports it only when it starts, so a process that does
not boot the ``openai`` worker never loads the SDK. The SDK's own retries are off
(``max_retries=0``): the service retries by error class.

What the stream maps to:

- ``delta.content`` (or ``delta.refusal``) → text; ``delta.reasoning_content`` /
  ``delta.reasoning`` (DeepSeek, vLLM, Kimi, Ollama, OpenRouter) → thinking;
- ``delta.tool_calls[i]`` → tool-call pieces keyed by the wire ``index`` (id and name come with
  the first piece; servers that send a whole call at once are fine too);
- ``finish_reason``: ``stop`` → end, ``length`` → length, ``tool_calls`` / ``function_call``
  → function_call (also when a server says ``stop`` after tool calls), ``content_filter`` → a
  ``permanent`` error;
- usage (``stream_options.include_usage``): ``input_tokens`` counts the prompt tokens **not**
  read from the cache (``prompt_tokens`` minus ``cached_tokens``), so cache reads are priced apart;
  DeepSeek's ``prompt_cache_hit_tokens`` and a top-level ``cached_tokens`` are understood, and
  OpenRouter's ``cost`` is used when the catalog has no prices.

A stream that ends without a ``finish_reason`` is an early end (retried if nothing was sent).
A failure after the ``finish_reason`` (a cut connection before the usage chunk) keeps the
finished answer.
"""

from __future__ import annotations

from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import ChoiceDelta
from openai.types.completion_usage import CompletionUsage

from tackroom.contracts.messages import StopReason
from tackroom.kit.providers.clients import KeyedClients, end_stream, read_to_stop
from tackroom.kit.providers.service import WireCall
from tackroom.kit.providers.sink import StreamSink
from tackroom.workers.openai.config import OpenAIProfile
from tackroom.workers.openai.convert import chat_params

__all__ = ["OpenAIAdapter"]

_FINISH: dict[str, StopReason] = {
    "stop": "end",
    "length": "length",
    "tool_calls": "function_call",
    "function_call": "function_call",
}
_REFUSALS = {"content_filter": "the provider's content filter stopped the answer (content_filter)"}
_REASONING_FIELDS = ("reasoning_content", "reasoning")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def record_usage(sink: StreamSink, usage: CompletionUsage) -> None:
    extra = usage.model_extra or {}
    cached = 0
    details = usage.prompt_tokens_details
    if details is not None and details.cached_tokens:
        cached = details.cached_tokens
    else:
        cached = _int(extra.get("prompt_cache_hit_tokens")) or _int(extra.get("cached_tokens")) or 0
    prompt = usage.prompt_tokens or 0
    cost = extra.get("cost")
    sink.usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
        cache_write_tokens=0,
        cost_usd=float(cost) if isinstance(cost, (int, float)) and cost >= 0 else None,
    )


def _call_key(index: int | None, call_id: str | None, position: int) -> object:
    """Tool-call pieces are matched by ``index``; a server that sends none sends whole calls."""
    if index is not None:
        return index
    return call_id or f"position-{position}"


class OpenAIAdapter:
    """One profile's SDK client (one copy per key, sharing the connection pool)."""

    def __init__(self, profile: OpenAIProfile) -> None:
        self._profile = profile
        self._clients = KeyedClients(openai.AsyncOpenAI, timeout=openai.Timeout, profile=profile)

    async def run(self, call: WireCall, sink: StreamSink) -> None:
        params = chat_params(call.request, call.model, self._profile)
        create: Any = self._clients.for_key(call.key).chat.completions.create
        stream = cast("openai.AsyncStream[ChatCompletionChunk]", await create(**params))
        sink.opened = True

        async def on_chunk(chunk: ChatCompletionChunk) -> str | None:
            if chunk.usage is not None:
                record_usage(sink, chunk.usage)
            finish: str | None = None
            for choice in chunk.choices:
                if choice.index:
                    continue  # n > 1 is never asked for
                await _read_delta(sink, choice.delta)
                finish = choice.finish_reason or finish
            return finish

        finish = await read_to_stop(stream, on_chunk)
        end_stream(sink, finish, reasons=_FINISH, refusals=_REFUSALS)

    async def aclose(self) -> None:
        await self._clients.aclose()


async def _read_delta(sink: StreamSink, delta: ChoiceDelta) -> None:
    extra = delta.model_extra
    if extra:
        for field in _REASONING_FIELDS:
            reasoning = extra.get(field)
            if isinstance(reasoning, str) and reasoning:
                await sink.thinking(reasoning)
                break
    if delta.content:
        await sink.text(delta.content)
    elif delta.refusal:
        await sink.text(delta.refusal)
    for position, piece in enumerate(delta.tool_calls or ()):
        function = piece.function
        await sink.call(
            _call_key(piece.index, piece.id, position),
            id=piece.id,
            name=function.name if function is not None else None,
            arguments=(function.arguments or "") if function else "",
        )
