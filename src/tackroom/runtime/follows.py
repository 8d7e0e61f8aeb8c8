"""Stream subscriptions the local endpoint holds for one connection (``endpoint::stream::*``).

Each open handle is an ``Engine.subscribe`` in the serving process, read by a pump task into a
bounded buffer; ``next`` hands out what the buffer holds, waiting for the first record. The pump
stops reading while the buffer is full, so a client that falls far behind leaves the engine's
own subscription to fall behind, with its rule: stored records are read again from storage,
live frames are lost (at most once). Nothing is lost while the client keeps reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from tackroom.contracts.endpoint import (
    ENDPOINT_SCHEMA_VERSION,
    STREAM_CLOSE,
    STREAM_NEXT,
    STREAM_OPEN,
    StreamClosed,
    StreamCloseRequest,
    StreamHandle,
    StreamNextRequest,
    StreamOpenRequest,
)
from tackroom.engine.errors import EngineError, InvocationError
from tackroom.engine.protocol import Engine, StreamRecord, Subscription
from tackroom.runtime.errors import TooManyStreams, UnknownStreamHandle
from tackroom.runtime.tasks import TaskSet
from tackroom.runtime.typed import describe_validation_error

__all__ = [
    "DEFAULT_BUFFER",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_STREAMS",
    "LOCAL_FUNCTIONS",
    "StreamHandles",
]

DEFAULT_MAX_STREAMS = 64
DEFAULT_IDLE_TIMEOUT = 120.0
DEFAULT_BUFFER = 1024

LOCAL_FUNCTIONS = frozenset({STREAM_OPEN.id, STREAM_NEXT.id, STREAM_CLOSE.id})

_RECORD_OVERHEAD = 96
"""Bytes a record's envelope adds to its data in a batch (keys, seq, timestamp, live)."""

_log = logging.getLogger("tackroom.endpoint")


class _Follow:
    """One open subscription and the pump that reads it into ``buffer``."""

    def __init__(self, subscription: Subscription, *, buffer_limit: int) -> None:
        self.subscription = subscription
        self.buffer: deque[StreamRecord] = deque()
        self.buffer_limit = buffer_limit
        self.ready = asyncio.Event()
        self.space = asyncio.Event()
        self.lock = asyncio.Lock()
        self.ended = False
        self.failure: EngineError | None = None
        self.busy = False
        self.touched = time.monotonic()

    async def pump(self) -> None:
        try:
            async for record in self.subscription:
                while len(self.buffer) >= self.buffer_limit:
                    self.space.clear()
                    await self.space.wait()
                self.buffer.append(record)
                self.ready.set()
        except EngineError as exc:
            self.failure = exc
        finally:
            self.ended = True
            self.ready.set()

    async def next(self, request: StreamNextRequest, *, max_bytes: int) -> dict[str, Any]:
        async with self.lock:
            self.busy = True
            try:
                if not self.buffer and not self.ended and request.wait > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(request.wait):
                            await self.ready.wait()
                return self._batch(request.limit, max_bytes)
            finally:
                self.busy = False
                self.touched = time.monotonic()

    def _batch(self, limit: int, max_bytes: int) -> dict[str, Any]:
        records: list[dict[str, Any]] = []
        size = 0
        buffer = self.buffer
        while buffer and len(records) < limit:
            record = buffer[0]
            cost = len(json.dumps(record.data, separators=(",", ":"))) + _RECORD_OVERHEAD
            if records and size + cost > max_bytes:
                break  # a record alone larger than a frame goes alone: the endpoint refuses it
            buffer.popleft()
            size += cost
            records.append(
                {
                    "seq": record.seq,
                    "data": record.data,
                    "timestamp": record.timestamp,
                    "live": record.live,
                }
            )
        self.space.set()
        if not buffer:
            if self.failure is not None and not records:
                raise self.failure
            if not self.ended:
                self.ready.clear()
        ended = self.ended and not buffer and self.failure is None
        return {"schema_version": ENDPOINT_SCHEMA_VERSION, "records": records, "ended": ended}

    async def close(self) -> None:
        self.ended = True
        self.ready.set()
        await self.subscription.aclose()


class StreamHandles:
    """The subscriptions of one endpoint connection, by handle."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_open: int = DEFAULT_MAX_STREAMS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_batch_bytes: int,
        buffer_limit: int = DEFAULT_BUFFER,
    ) -> None:
        self.engine = engine
        self.max_open = max_open
        self.idle_timeout = idle_timeout
        self.max_batch_bytes = max_batch_bytes
        self.buffer_limit = buffer_limit
        self._follows: dict[str, _Follow] = {}
        self._pumps: dict[str, asyncio.Task[None]] = {}
        self._tasks = TaskSet(owner="endpoint streams")
        self._sweeping = False
        self._closed = False
        self._handlers: dict[str, tuple[type[BaseModel], Callable[[Any], Awaitable[Any]]]] = {
            STREAM_OPEN.id: (StreamOpenRequest, self.open),
            STREAM_NEXT.id: (StreamNextRequest, self.next),
            STREAM_CLOSE.id: (StreamCloseRequest, self.close),
        }

    def __len__(self) -> int:
        return len(self._follows)

    async def call(self, function_id: str, payload: Any) -> Any:
        """Serve one of :data:`LOCAL_FUNCTIONS` with its JSON payload; a JSON result."""
        model, handler = self._handlers[function_id]
        try:
            request = model.model_validate({} if payload is None else payload)
        except ValidationError as exc:
            raise InvocationError(
                function_id, "invalid_request", describe_validation_error(exc)
            ) from None
        result = await handler(request)
        return result.model_dump(mode="json") if isinstance(result, BaseModel) else result

    async def open(self, request: StreamOpenRequest) -> StreamHandle:
        if self._closed:
            raise UnknownStreamHandle("the connection is closing")
        if len(self._follows) >= self.max_open:
            raise TooManyStreams(
                f"this connection holds {len(self._follows)} open subscriptions, the most one "
                "may: close one (endpoint::stream::close) first"
            )
        subscription = await self.engine.subscribe(
            request.stream, request.group_id, after=request.after
        )
        if self._closed:  # the connection closed while it subscribed
            await subscription.aclose()
            raise UnknownStreamHandle("the connection is closing")
        handle = os.urandom(8).hex()
        follow = _Follow(subscription, buffer_limit=self.buffer_limit)
        self._follows[handle] = follow
        self._pumps[handle] = self._tasks.spawn(follow.pump(), name=f"endpoint stream {handle}")
        if not self._sweeping:
            self._sweeping = True
            self._tasks.spawn(self._sweep(), name="endpoint stream sweeper")
        return StreamHandle(handle=handle)

    async def next(self, request: StreamNextRequest) -> dict[str, Any]:
        follow = self._follows.get(request.handle)
        if follow is None:
            raise UnknownStreamHandle(f"no open subscription has the handle {request.handle!r}")
        return await follow.next(request, max_bytes=self.max_batch_bytes)

    async def close(self, request: StreamCloseRequest) -> StreamClosed:
        return StreamClosed(closed=await self._close(request.handle))

    async def _close(self, handle: str) -> bool:
        follow = self._follows.pop(handle, None)
        if follow is None:
            return False
        pump = self._pumps.pop(handle)
        pump.cancel()
        await asyncio.wait({pump})  # its failure, if any, is the task set's to report
        await follow.close()
        return True

    async def close_all(self) -> None:
        self._closed = True
        for handle in list(self._follows):
            await self._close(handle)
        await self._tasks.cancel_all()

    async def _sweep(self) -> None:
        """Close the handles no ``next`` used for ``idle_timeout`` (a client that forgot one)."""
        try:
            while self._follows:
                await asyncio.sleep(max(self.idle_timeout / 4, 0.01))
                cutoff = time.monotonic() - self.idle_timeout
                for handle, follow in list(self._follows.items()):
                    if not follow.busy and follow.touched < cutoff:
                        _log.info("endpoint: closing stream handle %s, idle", handle)
                        await self._close(handle)
        finally:
            self._sweeping = False
