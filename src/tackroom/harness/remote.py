"""The harness as a client of another process's engine, through its local endpoint.

When ``tackroom serve`` owns the embedded engine, a second harness in the same directory cannot
open it; it reaches that process through its Unix socket instead. The endpoint carries function
calls only, so this adapter gives the facade what it needs from a bus on top of ``trigger``:
state writes through the engine worker's ``STATE_SET`` and an event subscription that reads
``STREAM_READ`` from a cursor (polling, quickly while records arrive, backing off to a fifth of a
second when idle).
"""

from __future__ import annotations

import asyncio
from collections import deque
from pathlib import Path
from typing import Any

from tackroom.contracts.engine import (
    STATE_SET,
    STREAM_READ,
    Revision,
    StateSetRequest,
    StreamReadRequest,
)
from tackroom.engine.protocol import DEFAULT_TIMEOUT, StreamRecord, Subscription
from tackroom.runtime.client import LocalClient

__all__ = ["PolledSubscription", "RemoteBus"]

_POLL_MIN = 0.01
_POLL_MAX = 0.2
_PAGE = 500


class PolledSubscription:
    """Records of ``(stream, group_id)`` after a cursor, read page by page."""

    def __init__(self, client: LocalClient, stream: str, group_id: str, *, after: int) -> None:
        self._client = client
        self._stream = stream
        self._group = group_id
        self._after = after
        self._buffer: deque[StreamRecord] = deque()
        self._closed = False

    def __aiter__(self) -> PolledSubscription:
        return self

    async def __anext__(self) -> StreamRecord:
        delay = _POLL_MIN
        while not self._buffer:
            if self._closed:
                raise StopAsyncIteration
            request = StreamReadRequest(
                stream=self._stream, group_id=self._group, after=self._after, limit=_PAGE
            )
            for item in (await STREAM_READ.call(self._client, request)).records:
                self._buffer.append(
                    StreamRecord(
                        stream=self._stream,
                        group_id=self._group,
                        seq=item.seq,
                        data=item.data,
                        timestamp=item.timestamp,
                    )
                )
            if not self._buffer:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _POLL_MAX)
        record = self._buffer.popleft()
        self._after = record.seq
        return record

    async def aclose(self) -> None:
        self._closed = True
        self._buffer.clear()


class RemoteBus:
    """``trigger``, ``subscribe`` and ``set_state`` of an engine served by another process."""

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
        """Stored records only: live frames (token deltas) do not cross the local endpoint, so
        a remote harness shows an answer when it is complete."""
        return PolledSubscription(self.client, stream, group_id, after=after)

    async def snapshot(self, stream: str, group_id: str) -> list[StreamRecord]:
        return []

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> Revision:
        request = StateSetRequest(
            scope=scope, key=key, value=value, expected_revision=expected_revision
        )
        return await STATE_SET.call(self.client, request)

    async def close(self) -> None:
        await self.client.close()
