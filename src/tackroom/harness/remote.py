"""The harness as a client of another process's engine, through its local endpoint.

When ``tackroom serve`` owns the embedded engine, a second harness in the same directory cannot
open it; it reaches that process through its Unix socket instead. The endpoint carries function
calls, so this adapter gives the facade what it needs from a bus on top of ``trigger``: state
writes through the engine worker's ``STATE_SET``, snapshots through ``STREAM_SNAPSHOT``, and a
subscription the endpoint holds for this connection (``endpoint::stream::*``), read in batches
by long polls: stored records and live frames (token deltas) in order, as ``Engine.subscribe``
gives them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from pathlib import Path
from typing import Any

from tackroom.contracts.endpoint import (
    STREAM_CLOSE,
    STREAM_NEXT,
    STREAM_OPEN,
    StreamBatch,
    StreamCloseRequest,
    StreamNextRequest,
    StreamOpenRequest,
)
from tackroom.contracts.engine import (
    STATE_SET,
    STREAM_SNAPSHOT,
    Revision,
    StateSetRequest,
    StreamSnapshotRequest,
)
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import DEFAULT_TIMEOUT, StreamRecord, Subscription
from tackroom.runtime.client import LocalClient
from tackroom.runtime.errors import UnknownStreamHandle

__all__ = ["EndpointSubscription", "RemoteBus"]

_WAIT = 20.0
"""Seconds one long poll waits for a record before it is asked again."""
_GRACE = 10.0


class EndpointSubscription:
    """Records of ``(stream, group_id)`` after a cursor, from a subscription the endpoint holds.

    A batch being fetched survives the cancellation of the ``__anext__`` that asked for it (the
    next call takes it), so a reader that times out a read loses nothing. A handle the endpoint
    closed for idleness is opened again from the last stored sequence handed out: stored records
    go on where they stopped, live frames published meanwhile are lost (as for any subscription
    that falls behind).
    """

    def __init__(
        self, client: LocalClient, stream: str, group_id: str, *, handle: str, after: int
    ) -> None:
        self._client = client
        self._stream = stream
        self._group = group_id
        self._handle = handle
        self._after = after
        self._buffer: deque[StreamRecord] = deque()
        self._fetch: asyncio.Future[StreamBatch] | None = None
        self._ended = False
        self._closed = False

    @classmethod
    async def open(
        cls, client: LocalClient, stream: str, group_id: str, *, after: int
    ) -> EndpointSubscription:
        handle = await _open(client, stream, group_id, after=after)
        return cls(client, stream, group_id, handle=handle, after=after)

    def __aiter__(self) -> EndpointSubscription:
        return self

    async def __anext__(self) -> StreamRecord:
        while not self._buffer:
            if self._closed or self._ended:
                raise StopAsyncIteration
            batch = await self._batch()
            if self._closed:  # closed by another task while this one waited
                raise StopAsyncIteration
            stream, group = self._stream, self._group
            self._buffer.extend(
                StreamRecord(stream, group, r.seq, r.data, r.timestamp, r.live)
                for r in batch.records
            )
            self._ended = batch.ended
        record = self._buffer.popleft()
        if not record.live:
            self._after = record.seq
        return record

    async def _batch(self) -> StreamBatch:
        if self._fetch is None:
            self._fetch = asyncio.ensure_future(self._next())
        fetch = self._fetch
        try:
            return await asyncio.shield(fetch)
        finally:
            if fetch.done():
                self._fetch = None

    async def _next(self) -> StreamBatch:
        request = StreamNextRequest(handle=self._handle, wait=_WAIT)
        try:
            return await STREAM_NEXT.call(self._client, request, timeout=_WAIT + _GRACE)
        except UnknownStreamHandle:
            if self._closed:
                return StreamBatch(records=[], ended=True)
            self._handle = await _open(self._client, self._stream, self._group, after=self._after)
            if self._closed:
                await self._close_handle()
            return StreamBatch(records=[])

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._buffer.clear()
        await self._close_handle()
        fetch, self._fetch = self._fetch, None
        if fetch is not None:  # answered at once now that its handle is closed
            await asyncio.wait({fetch})  # not cancelled: another task may be reading it
            if not fetch.cancelled():
                fetch.exception()  # retrieved here if nobody reads it

    async def _close_handle(self) -> None:
        with contextlib.suppress(EngineError):  # a connection already gone closed the handle
            await STREAM_CLOSE.call(self._client, StreamCloseRequest(handle=self._handle))


async def _open(client: LocalClient, stream: str, group_id: str, *, after: int) -> str:
    request = StreamOpenRequest(stream=stream, group_id=group_id, after=after)
    return (await STREAM_OPEN.call(client, request)).handle


class RemoteBus:
    """``trigger``, ``subscribe``, ``snapshot`` and ``set_state`` of an engine served by another
    process."""

    def __init__(self, client: LocalClient) -> None:
        self.client = client

    @classmethod
    async def connect(cls, socket: Path, *, max_frame_bytes: int) -> RemoteBus:
        client = LocalClient(socket, max_frame_bytes=max_frame_bytes)
        await client.connect()
        return cls(client)

    async def trigger(
        self, function_id: str, payload: Any = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        return await self.client.trigger(function_id, payload, timeout=timeout)

    async def subscribe(self, stream: str, group_id: str, *, after: int = 0) -> Subscription:
        """Subscribed in the serving process when this returns: nothing appended or published
        after it is missed."""
        return await EndpointSubscription.open(self.client, stream, group_id, after=after)

    async def snapshot(self, stream: str, group_id: str) -> list[StreamRecord]:
        request = StreamSnapshotRequest(stream=stream, group_id=group_id)
        taken = await STREAM_SNAPSHOT.call(self.client, request)
        return [
            StreamRecord(stream, group_id, r.seq, r.data, r.timestamp, True) for r in taken.records
        ]

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> Revision:
        request = StateSetRequest(
            scope=scope, key=key, value=value, expected_revision=expected_revision
        )
        return await STATE_SET.call(self.client, request)

    async def close(self) -> None:
        await self.client.close()
