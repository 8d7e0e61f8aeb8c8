"""One model call read to its end: for workers that need an answer, not a stream (the
compactor's summaries). The provider streams its frames over a channel as for any call; this
reads them and returns the final message (an error message when the call failed)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tackroom.contracts.messages import AssistantMessage, TextBlock
from tackroom.contracts.provider import (
    DoneEvent,
    ErrorEvent,
    MalformedFrame,
    ProviderRequest,
    read_frame,
    stream_function,
)
from tackroom.engine.errors import ChannelAborted, EngineError, unavailable_cause
from tackroom.engine.protocol import Engine

__all__ = ["complete"]

_DRAIN_SECONDS = 5.0


async def complete(
    engine: Engine, provider: str, request: ProviderRequest, *, timeout: float
) -> AssistantMessage:
    """``request`` sent to ``provider::<provider>::stream``; its final message."""
    channel = await engine.open_channel(capacity=256)
    request = request.model_copy(update={"writer": channel.ref.to_json()})
    final: list[AssistantMessage] = []

    async def read() -> None:
        with contextlib.suppress(ChannelAborted):
            async for frame in channel:
                message = _terminal(frame)
                if message is not None:
                    final.append(message)

    async with asyncio.TaskGroup() as group:
        reader = group.create_task(read())
        try:
            await stream_function(provider).send(engine, request, timeout=timeout)
        except EngineError as exc:
            if unavailable_cause(exc) is not None:
                reader.cancel()
                raise
            final.append(_failed(f"the model call failed: {exc}"))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), _DRAIN_SECONDS)
        if not reader.done():
            await channel.aclose()
    return final[0] if final else _failed("the provider ended the stream without a message")


def _terminal(raw: Any) -> AssistantMessage | None:
    try:
        frame = read_frame(raw)
    except MalformedFrame as exc:
        return _failed(str(exc))
    if isinstance(frame, DoneEvent):
        return frame.message
    if isinstance(frame, ErrorEvent):
        return _failed(frame.message)
    return None


def _failed(text: str) -> AssistantMessage:
    return AssistantMessage(
        content=[TextBlock(text=text)],
        stop_reason="error",
        error_kind="transient",
        error_message=text,
    )
