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

import logging
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionChunk
from openai.types.completion_usage import CompletionUsage

from tackroom.contracts.messages import StopReason
from tackroom.kit.providers.errors import ProviderFailure
from tackroom.kit.providers.service import WireCall
from tackroom.kit.providers.sink import StreamSink
from tackroom.workers.openai.config import OpenAIProfile
from tackroom.workers.openai.convert import chat_params

__all__ = ["OpenAIAdapter"]

_log = logging.getLogger("tackroom.providers")

_FINISH: dict[str, StopReason] = {
    "stop": "end",
    "length": "length",
    "tool_calls": "function_call",
    "function_call": "function_call",
}
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
        self._base = openai.AsyncOpenAI(
            api_key=profile.placeholder_key,
            base_url=profile.base_url,
            max_retries=0,
            timeout=openai.Timeout(profile.timeout, connect=profile.connect_timeout),
            default_headers=profile.headers or None,
        )
        self._clients: dict[str, openai.AsyncOpenAI] = {}

    def _client(self, key: str) -> openai.AsyncOpenAI:
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self._base.with_options(api_key=key)
        return client

    async def run(self, call: WireCall, sink: StreamSink) -> None:
        params = chat_params(call.request, call.model, self._profile)
        create: Any = self._client(call.key).chat.completions.create
        stream = cast("openai.AsyncStream[ChatCompletionChunk]", await create(**params))
        sink.opened = True
        finish: str | None = None
        try:
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        record_usage(sink, chunk.usage)
                    for choice in chunk.choices:
                        if choice.index:
                            continue  # n > 1 is never asked for
                        delta = choice.delta
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
                        if delta.tool_calls:
                            for position, piece in enumerate(delta.tool_calls):
                                function = piece.function
                                await sink.call(
                                    _call_key(piece.index, piece.id, position),
                                    id=piece.id,
                                    name=function.name if function is not None else None,
                                    arguments=(function.arguments or "") if function else "",
                                )
                        if choice.finish_reason is not None:
                            finish = choice.finish_reason
        except Exception:
            if finish is None:
                raise
            _log.debug("the stream failed after its finish_reason; keeping the answer")
        if finish is None:
            return  # no stop reason: the sink reports an early end
        if finish == "content_filter":
            raise ProviderFailure(
                "permanent", "the provider's content filter stopped the answer (content_filter)"
            )
        sink.stop(_FINISH.get(finish, "end"))

    async def aclose(self) -> None:
        await self._base.close()
