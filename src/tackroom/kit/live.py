"""Live events of ``agent::events``: what a model call publishes while it streams, and how a reader
merges it with the stored events.

**Writing** (:class:`RunLive`): coalesced deltas go out as ``message_update`` frames to the
subscribers connected now (``Engine.publish``, never stored), each numbered (``index``) within
its ``stream_id``; while the message streams, the process offers a ``message_snapshot`` of it
(the parts so far and ``through``, the index of the last update they hold). The stored
``message_complete`` is the message.

**Reading** (:class:`LiveFeed`): a reader that connects mid-answer opens its subscription, then
asks for the snapshots; it hands a snapshot out once it has handed out the stored records that
were there when the snapshot was taken (or just before a later update of that message), then
drops the updates the snapshot holds (``index ≤ through``). Updates and snapshots of a message
whose ``message_complete`` it already handed out are dropped too (a late frame of a stream that
lost its step). So: stored events in order, a message's snapshot once, its live deltas after it,
none twice. ``Harness.follow``/``stream`` and the gateway's SSE read through it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import Any, Protocol

from tackroom.contracts.events import (
    EVENT_SCHEMA_VERSION,
    EVENTS,
    MessageSnapshotData,
    event_id,
    event_of,
)
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import LiveFrames, StreamRecord, Subscription

__all__ = ["NO_LIVE", "LiveBus", "LiveFeed", "LiveSink", "RunLive"]

_COMPLETED_KEPT = 256
"""Completed message ids a feed remembers, to drop a late frame of one."""


class LiveSink(Protocol):
    """Where a model call's live events go (:class:`RunLive`, or :data:`NO_LIVE`)."""

    async def update(
        self, *, message_id: str, stream_id: str, kind: str, delta: str, index: int
    ) -> None: ...

    def offering(
        self, message_id: str, snapshot: Callable[[], MessageSnapshotData]
    ) -> AbstractAsyncContextManager[None]: ...


class RunLive:
    """One run's live events on the session's ``agent::events`` group."""

    def __init__(self, engine: LiveFrames, *, session_id: str, run_id: str) -> None:
        self._engine = engine
        self._session_id = session_id
        self._run_id = run_id

    async def update(
        self, *, message_id: str, stream_id: str, kind: str, delta: str, index: int
    ) -> None:
        # Built by hand, not through the pydantic models: this is the per-delta path.
        frame = {
            "schema_version": EVENT_SCHEMA_VERSION,
            "type": "message_update",
            "session_id": self._session_id,
            "run_id": self._run_id,
            "event_id": f"{self._run_id}:{message_id}:{stream_id}:u{index}",
            "data": {
                "message_id": message_id,
                "stream_id": stream_id,
                "kind": kind,
                "delta": delta,
                "index": index,
            },
        }
        await self._engine.publish(EVENTS.name, self._session_id, frame)

    def offering(
        self, message_id: str, snapshot: Callable[[], MessageSnapshotData]
    ) -> AbstractAsyncContextManager[None]:
        def frame() -> Any:
            data = snapshot()
            key = event_id(message_id, str(data.stream_id), f"s{data.through}")
            return EVENTS.dump_event(
                event_of(
                    session_id=self._session_id,
                    run_id=self._run_id,
                    event_id=event_id(self._run_id, key),
                    data=data,
                )
            )

        return self._engine.offer_snapshot(EVENTS.name, self._session_id, frame)


class _NoLive:
    """Nothing goes out live (deltas held back for an ``after_model_call`` redactor)."""

    async def update(
        self, *, message_id: str, stream_id: str, kind: str, delta: str, index: int
    ) -> None:
        return None

    def offering(
        self, message_id: str, snapshot: Callable[[], MessageSnapshotData]
    ) -> AbstractAsyncContextManager[None]:
        return _nothing()


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


NO_LIVE: LiveSink = _NoLive()


class LiveBus(Protocol):
    """What a feed needs of a bus (an ``Engine``, or the facade's remote bus)."""

    async def subscribe(self, stream: str, group_id: str, *, after: int = 0) -> Subscription: ...

    async def snapshot(self, stream: str, group_id: str) -> list[StreamRecord]: ...


class LiveFeed:
    """A session's events for a reader: stored, live, and (``snapshots``) the snapshot of a
    message that streams as it connects. A :class:`Subscription`; ``records`` is the raw one."""

    def __init__(
        self, bus: LiveBus, records: Subscription, *, group_id: str, after: int, snapshots: bool
    ) -> None:
        self._bus = bus
        self.records = records
        self._group_id = group_id
        self._cursor = after
        self._ask = snapshots
        self._pending: list[StreamRecord] = []
        self._next: StreamRecord | None = None
        self._through: dict[tuple[Any, Any], int] = {}
        self._completed: set[Any] = set()
        self._completed_order: deque[Any] = deque()

    @classmethod
    async def open(
        cls, bus: LiveBus, group_id: str, *, after: int = 0, snapshots: bool = True
    ) -> LiveFeed:
        """Subscribed now; the snapshots are asked for on the first read (still no gap: the
        subscription is already open)."""
        records = await bus.subscribe(EVENTS.name, group_id, after=after)
        return cls(bus, records, group_id=group_id, after=after, snapshots=snapshots)

    def __aiter__(self) -> LiveFeed:
        return self

    async def __anext__(self) -> StreamRecord:
        if self._ask:
            self._ask = False
            await self._take_snapshots()
        while True:
            if self._next is not None:
                record, self._next = self._next, None
                return record
            if self._pending and (ready := self._ready()) is not None:
                return ready
            record = await self.records.__anext__()
            if not record.live:
                self._cursor = record.seq
                data = record.data
                if type(data) is dict and data.get("type") == "message_complete":
                    self._complete(data.get("data"))
                return record
            passed = self._live(record)
            if passed is not None:
                return passed

    async def _take_snapshots(self) -> None:
        try:
            taken = await self._bus.snapshot(EVENTS.name, self._group_id)
        except EngineError:
            return  # a reader without the snapshot still gets every later event
        for snapshot in taken:
            data = snapshot.data
            if (
                type(data) is dict
                and data.get("type") == "message_snapshot"
                and type(data.get("data")) is dict
            ):
                self._pending.append(snapshot)

    def _ready(self) -> StreamRecord | None:
        for index, snapshot in enumerate(self._pending):
            if snapshot.seq <= self._cursor:
                return self._hand_out(self._pending.pop(index))
        return None

    def _hand_out(self, snapshot: StreamRecord) -> StreamRecord:
        data = snapshot.data["data"]
        through = data.get("through")
        key = (data.get("message_id"), data.get("stream_id"))
        self._through[key] = through if isinstance(through, int) else 0
        return replace(snapshot, seq=self._cursor)

    def _live(self, record: StreamRecord) -> StreamRecord | None:
        frame = record.data
        if type(frame) is not dict or frame.get("type") != "message_update":
            return record
        data = frame.get("data")
        if type(data) is not dict:
            return record
        message_id = data.get("message_id")
        if message_id in self._completed:
            return None
        for index, snapshot in enumerate(self._pending):
            if snapshot.data["data"].get("message_id") == message_id:
                # The snapshot first (early: its stored records are late), then the update if
                # the snapshot does not hold it.
                ready = self._hand_out(self._pending.pop(index))
                if self._newer(data):
                    self._next = record
                return ready
        return record if self._newer(data) else None

    def _newer(self, data: dict[str, Any]) -> bool:
        through = self._through.get((data.get("message_id"), data.get("stream_id")))
        index = data.get("index")
        return through is None or not isinstance(index, int) or index == 0 or index > through

    def _complete(self, data: Any) -> None:
        message_id = data.get("message_id") if type(data) is dict else None
        if message_id is None:
            return
        if message_id not in self._completed:
            self._completed.add(message_id)
            self._completed_order.append(message_id)
            if len(self._completed_order) > _COMPLETED_KEPT:
                self._completed.discard(self._completed_order.popleft())
        self._pending = [s for s in self._pending if s.data["data"].get("message_id") != message_id]
        for key in [key for key in self._through if key[0] == message_id]:
            del self._through[key]

    async def aclose(self) -> None:
        await self.records.aclose()
