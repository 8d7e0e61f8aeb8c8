"""In-process channels: a bounded frame buffer with backpressure, close and abort."""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from typing import Any, Self

from tackroom.engine.errors import ChannelAborted, ChannelClosed
from tackroom.engine.jsonvalue import to_json_value
from tackroom.engine.protocol import ChannelRef

__all__ = ["ChannelTable", "LocalChannel", "LocalChannelWriter", "ReadEnd"]


class ReadEnd:
    """What every backend's channel read end shares: the frames buffered in send order, and an
    iteration that stops once the channel is closed (by either end) and raises
    :class:`ChannelAborted` once it is aborted, after the frames already buffered."""

    def __init__(self, *, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("channel capacity must be at least 1")
        self._ref = ChannelRef(channel_id=uuid.uuid4().hex)
        self._capacity = capacity
        self._frames: deque[Any] = deque()
        self._readable = asyncio.Event()
        self._ended = False
        self._abort_reason: str | None = None
        self._reader_closed = False

    @property
    def ref(self) -> ChannelRef:
        return self._ref

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        while not self._frames:
            if self._abort_reason is not None:
                raise ChannelAborted(self._abort_reason)
            if self._ended or self._reader_closed:
                raise StopAsyncIteration
            self._readable.clear()
            await self._readable.wait()
        frame = self._frames.popleft()
        await self._taken()
        return frame

    async def _taken(self) -> None:
        """A frame was read: there is room for one more."""


class LocalChannel(ReadEnd):
    """The read end. Frames arrive in send order; the writer waits while ``capacity`` are unread."""

    def __init__(self, table: ChannelTable, *, capacity: int) -> None:
        super().__init__(capacity=capacity)
        self._table = table
        self._writable = asyncio.Event()
        self._writable.set()

    async def _taken(self) -> None:
        self._writable.set()

    async def aclose(self) -> None:
        self._reader_closed = True
        self._frames.clear()
        self._writable.set()
        self._readable.set()
        self._table.forget(self._ref.channel_id)

    # -- the writer's side -------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._reader_closed:
            raise ChannelClosed("the reader closed this channel")
        if self._ended or self._abort_reason is not None:
            raise ChannelClosed("this channel is already closed")

    async def put(self, frame: Any) -> None:
        self._check_open()
        frame = to_json_value(frame, what="channel frame")
        while len(self._frames) >= self._capacity:
            self._writable.clear()
            await self._writable.wait()
            self._check_open()
        self._frames.append(frame)
        self._readable.set()

    def end(self, *, abort_reason: str | None = None) -> None:
        self._check_open()
        if abort_reason is None:
            self._ended = True
        else:
            self._abort_reason = abort_reason
        self._readable.set()
        self._writable.set()
        self._table.forget(self._ref.channel_id)


class LocalChannelWriter:
    def __init__(self, table: ChannelTable, ref: ChannelRef) -> None:
        self._table = table
        self._ref = ref

    def _channel(self) -> LocalChannel:
        channel = self._table.find(self._ref.channel_id)
        if channel is None:
            raise ChannelClosed(f"channel {self._ref.channel_id} is closed or unknown")
        return channel

    async def send(self, frame: Any) -> None:
        await self._channel().put(frame)

    async def close(self) -> None:
        self._channel().end()

    async def abort(self, reason: str) -> None:
        self._channel().end(abort_reason=reason)


class ChannelTable:
    """Open channels of one engine, by id."""

    def __init__(self) -> None:
        self._open: dict[str, LocalChannel] = {}

    def open(self, *, capacity: int) -> LocalChannel:
        channel = LocalChannel(self, capacity=capacity)
        self._open[channel.ref.channel_id] = channel
        return channel

    def find(self, channel_id: str) -> LocalChannel | None:
        return self._open.get(channel_id)

    def forget(self, channel_id: str) -> None:
        self._open.pop(channel_id, None)

    def writer(self, ref: ChannelRef) -> LocalChannelWriter:
        return LocalChannelWriter(self, ref)

    async def close_all(self) -> None:
        for channel in list(self._open.values()):
            await channel.aclose()
