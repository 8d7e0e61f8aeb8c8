"""Where an SDK adapter puts what the model says: stream frames out, the finished message in.

An adapter calls :meth:`StreamSink.text`, :meth:`~StreamSink.thinking`,
:meth:`~StreamSink.call` (tool-call pieces) as the wire delivers them, records usage and the
stop reason, and returns; :meth:`StreamSink.finish` then builds the :class:`AssistantMessage`.
With ``send`` (:func:`~tackroom.kit.providers.streaming.serve_stream`'s) each piece goes out at
once as one typed frame and :attr:`StreamSink.emitted` turns true; without it (``complete``) the
pieces are only collected. After each content frame the sink yields to the event loop once, so
the reader (and the event stream it feeds) handles the delta before the SDK goes back to its
socket: the SDK's read path would otherwise run first and delay every delta by its cost.

The frames of a call are re-numbered densely (``index`` 0, 1, …) in the order the calls are
announced, and a call is announced only once its name is known.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Hashable
from typing import Any

from tackroom.contracts.messages import (
    RAW_ARGUMENTS_KEY,
    AssistantMessage,
    ContentBlock,
    FunctionCallBlock,
    StopReason,
    TextBlock,
    ThinkingBlock,
    Usage,
)
from tackroom.contracts.provider import FunctionCallDelta, ProviderEvent, TextDelta, ThinkingDelta
from tackroom.engine.errors import InvalidPayload
from tackroom.engine.jsonvalue import MAX_CONTENT_DEPTH, to_json_value
from tackroom.kit.providers.catalog import Prices, priced
from tackroom.kit.providers.errors import ProviderFailure, StreamEndedEarly
from tackroom.kit.providers.streaming import Send

__all__ = ["RAW_ARGUMENTS_KEY", "REDACTED_THINKING_PREFIX", "Send", "StreamSink"]

REDACTED_THINKING_PREFIX = "redacted:"
"""A redacted thinking block is kept as a ``ThinkingBlock`` with empty text and this prefix
before the provider's opaque data in ``signature``, so it can be sent back verbatim."""


class _Block:
    __slots__ = ("key", "kind", "parts", "signature")

    def __init__(self, kind: str, key: Hashable) -> None:
        self.kind = kind
        self.key = key
        self.parts: list[str] = []
        self.signature: str | None = None


class _Call(_Block):
    __slots__ = ("id", "index", "name")

    def __init__(self, key: Hashable) -> None:
        super().__init__("call", key)
        self.id: str | None = None
        self.name: str | None = None
        self.index = -1


def parse_arguments(raw: str, *, what: str = "the tool call's arguments") -> dict[str, Any]:
    """The call's arguments; text that is not one JSON object is kept whole as
    ``{RAW_ARGUMENTS_KEY: text}`` (the turn tells the model it did not parse; the provider sends
    the text back as it was).

    Arguments nested deeper than ``MAX_CONTENT_DEPTH`` (or holding what JSON cannot carry, a
    NaN or a lone surrogate) fail the call with a permanent :class:`ProviderFailure`: the turn
    ends with that reason instead of storing a message nobody could read back.
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: raw}
    except RecursionError:
        raise ProviderFailure(
            "permanent", f"{what}: nests deeper than {MAX_CONTENT_DEPTH} levels"
        ) from None
    if not isinstance(value, dict):
        return {RAW_ARGUMENTS_KEY: raw}
    try:
        checked: dict[str, Any] = to_json_value(value, what=what, max_depth=MAX_CONTENT_DEPTH)
    except InvalidPayload as exc:
        raise ProviderFailure("permanent", exc.message) from None
    return checked


class StreamSink:
    """Collects one model answer and, given ``send``, streams it as provider frames."""

    def __init__(self, send: Send | None) -> None:
        self._send = send
        self.emitted = False
        """A content frame reached the reader: the call can no longer be retried."""
        self.opened = False
        """The server answered the attempt (set by the adapter once the response started)."""
        self.reset()

    def reset(self) -> None:
        """Forget a failed attempt's pieces (only valid while nothing was emitted)."""
        self.opened = False
        self._blocks: list[_Block] = []
        self._last: _Block | None = None
        self._calls: dict[Hashable, _Call] = {}
        self._announced = 0
        self.stop_reason: StopReason | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0
        self.reported_cost: float | None = None

    # -- pieces ------------------------------------------------------------------------------
    async def _emit(self, frame: ProviderEvent) -> None:
        assert self._send is not None
        self.emitted = True
        await self._send(frame)
        await asyncio.sleep(0)  # let the reader take the delta before the SDK reads on

    def _open(self, kind: str, key: Hashable) -> _Block:
        block = _Block(kind, key)
        self._blocks.append(block)
        self._last = block
        return block

    async def text(self, delta: str, key: Hashable = None) -> None:
        if not delta:
            return
        block = self._last
        if block is None or block.kind != "text" or block.key != key:
            block = self._open("text", key)
        block.parts.append(delta)
        if self._send is not None:
            await self._emit(TextDelta(delta=delta))

    async def thinking(
        self, delta: str, key: Hashable = None, *, signature: str | None = None
    ) -> None:
        if not delta and signature is None:
            return
        block = self._last
        if block is None or block.kind != "thinking" or block.key != key:
            block = self._open("thinking", key)
        if delta:
            block.parts.append(delta)
        if signature is not None:
            block.signature = (block.signature or "") + signature
        if self._send is not None:
            await self._emit(ThinkingDelta(delta=delta, signature=signature))

    def redacted_thinking(self, data: str, key: Hashable = None) -> None:
        """An opaque thinking block: kept for the next request, not shown."""
        block = self._open("thinking", key)
        block.signature = REDACTED_THINKING_PREFIX + data

    async def call(
        self,
        key: Hashable,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str = "",
    ) -> None:
        """A piece of the tool call ``key``: its id and name (first), argument JSON text."""
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = _Call(key)
        if id:
            call.id = id
        if name:
            call.name = name
        if arguments:
            call.parts.append(arguments)
        if call.index < 0:
            if call.name is None:
                return  # announced once the name is known
            call.index = self._announced
            self._announced += 1
            if call.id is None:
                call.id = f"call_{call.index}"
            self._blocks.append(call)
            self._last = call
            if self._send is not None:
                await self._emit(
                    FunctionCallDelta(
                        index=call.index,
                        id=call.id,
                        name=call.name,
                        arguments_delta="".join(call.parts),
                    )
                )
        elif arguments and self._send is not None:
            await self._emit(FunctionCallDelta(index=call.index, arguments_delta=arguments))

    def usage(
        self,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        cost_usd: float | None = None,
    ) -> None:
        """Record the usage the wire reports (``None`` keeps what was recorded before)."""
        if input_tokens is not None:
            self.input_tokens = input_tokens
        if output_tokens is not None:
            self.output_tokens = output_tokens
        if cache_read_tokens is not None:
            self.cache_read_tokens = cache_read_tokens
        if cache_write_tokens is not None:
            self.cache_write_tokens = cache_write_tokens
        if cost_usd is not None:
            self.reported_cost = cost_usd

    def stop(self, reason: StopReason) -> None:
        self.stop_reason = reason

    @property
    def has_calls(self) -> bool:
        return self._announced > 0

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    # -- the finished message ----------------------------------------------------------------
    def final_usage(self, prices: Prices) -> Usage:
        usage = Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
        )
        if prices.known:
            return priced(usage, prices)
        if self.reported_cost is not None:
            return usage.model_copy(update={"cost_usd": self.reported_cost})
        return usage

    def finish(self, *, provider: str, model: str, prices: Prices) -> AssistantMessage:
        """The finished message; raises if the stream did not finish it properly."""
        if self.stop_reason is None:
            raise StreamEndedEarly("no stop reason before the stream ended")
        pending = [call for call in self._calls.values() if call.index < 0]
        if pending:
            raise ProviderFailure("transient", "the provider sent a tool call without a name")
        content: list[ContentBlock] = []
        for block in self._blocks:
            if isinstance(block, _Call):
                assert block.id is not None
                assert block.name is not None
                content.append(
                    FunctionCallBlock(
                        id=block.id,
                        tool_name=block.name,
                        arguments=parse_arguments(
                            "".join(block.parts),
                            what=f"the arguments of tool call {block.name!r}",
                        ),
                    )
                )
            elif block.kind == "text":
                text = "".join(block.parts)
                if text:
                    content.append(TextBlock(text=text))
            else:
                content.append(ThinkingBlock(text="".join(block.parts), signature=block.signature))
        stop = self.stop_reason
        if self.has_calls and stop == "end":
            stop = "function_call"
        elif not self.has_calls and stop == "function_call":
            stop = "end"
        return AssistantMessage(
            content=content,
            stop_reason=stop,
            usage=self.final_usage(prices),
            provider=provider,
            model=model,
        )
