"""Live stream subscriptions: stored records after a cursor, then live ones, no gap, no dup.

Frames :meth:`~tackroom.engine.protocol.Engine.publish` sends (``live`` records, never stored)
ride in the same buffer as appended records, in the order the process made the two calls; a
subscription still catching up from storage hands them out once it has caught up.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from tackroom.engine.jsonvalue import to_json_value as copy_json
from tackroom.engine.protocol import StreamRecord

__all__ = ["StreamSubscription", "SubscriptionHub"]

_PAGE = 500

ReadPage = Callable[[int, int], list[StreamRecord]]


class StreamSubscription:
    """Catches up from storage by cursor, then takes records pushed at append time.

    Registered with the hub before its first read, so a record appended meanwhile is either in
    storage or in the live buffer (often both: duplicates are dropped by sequence). A reader that
    falls ``buffer_limit`` behind drops its buffer and catches up from storage again.
    """

    def __init__(
        self,
        hub: SubscriptionHub,
        key: tuple[str, str],
        *,
        after: int,
        read_page: ReadPage,
        buffer_limit: int = 1024,
    ) -> None:
        self._hub = hub
        self._key = key
        self._cursor = after
        self._read_page = read_page
        self._buffer_limit = buffer_limit
        self._stored: deque[StreamRecord] = deque()
        self._live: deque[StreamRecord] = deque()
        self._wake = asyncio.Event()
        self._catch_up = True
        self._closed = False

    def push(self, record: StreamRecord) -> None:
        """An appended record, or a live one (``record.live``: its ``seq`` is not used)."""
        if self._closed:
            return
        if len(self._live) >= self._buffer_limit:
            self._live.clear()
            self._catch_up = True
        else:
            self._live.append(record)
        self._wake.set()

    def __aiter__(self) -> StreamSubscription:
        return self

    async def __anext__(self) -> StreamRecord:
        while not self._closed:
            if self._stored:
                return self._advance(self._stored.popleft())
            if self._catch_up:
                page = self._read_page(self._cursor, _PAGE)
                self._catch_up = len(page) == _PAGE
                self._stored.extend(page)
                continue
            while self._live:
                record = self._live.popleft()
                if record.live:
                    stream, group_id = self._key
                    return StreamRecord(
                        stream, group_id, self._cursor, record.data, record.timestamp, True
                    )
                if record.seq > self._cursor:
                    return self._advance(record)
            self._wake.clear()
            await self._wake.wait()
        raise StopAsyncIteration

    def _advance(self, record: StreamRecord) -> StreamRecord:
        self._cursor = record.seq
        return record

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._wake.set()
            self._hub.remove(self._key, self)


class SubscriptionHub:
    def __init__(self) -> None:
        self._subs: dict[tuple[str, str], set[StreamSubscription]] = {}

    def add(self, key: tuple[str, str], sub: StreamSubscription) -> None:
        self._subs.setdefault(key, set()).add(sub)

    def remove(self, key: tuple[str, str], sub: StreamSubscription) -> None:
        subs = self._subs.get(key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[key]

    def publish(self, record: StreamRecord) -> None:
        """Push ``record`` to each live subscriber, each with its own copy of the data."""
        for index, sub in enumerate(self._subs.get((record.stream, record.group_id), ())):
            sub.push(record if index == 0 else replace(record, data=copy_json(record.data)))

    def subscribed(self, key: tuple[str, str]) -> bool:
        return key in self._subs

    async def close_all(self) -> None:
        for subs in list(self._subs.values()):
            for sub in list(subs):
                await sub.aclose()
