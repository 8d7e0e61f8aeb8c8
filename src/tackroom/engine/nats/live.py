"""Live frames and snapshots over core NATS: never stored, at most once.

``publish`` sends ``{"schema_version", "after", "ts", "data"}`` to ``<ns>.live.<stream>.<group>``
(``after``: the group's last sequence this process appended, so a subscriber hands the frame out
after that record — :mod:`.streams`). A process offering a snapshot of a group answers requests
on ``<ns>.snap.<stream>.<group>`` with ``{"schema_version", "values"}`` (the values of all its
providers for the group) while it offers one; with nobody offering, the server answers "no
responders" at once. Several processes offering for one group: the first to answer is heard.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from tackroom.engine.jsonvalue import dumps, to_json_value
from tackroom.engine.nats.link import Link, NoResponders, unavailable
from tackroom.engine.nats.naming import Names
from tackroom.engine.nats.streams import EventStreams
from tackroom.engine.protocol import StreamRecord
from tackroom.engine.snapshots import SnapshotOffers

__all__ = ["LIVE_SCHEMA_VERSION", "LiveFrames"]

LIVE_SCHEMA_VERSION = 1
_SNAPSHOT_TIMEOUT = 2.0
"""Seconds a snapshot request waits for a process that offers one (its loop may be busy)."""


class LiveFrames:
    def __init__(self, link: Link, names: Names, streams: EventStreams) -> None:
        self._link = link
        self._names = names
        self._streams = streams
        self._offers = SnapshotOffers()
        self._serving: dict[tuple[str, str], Subscription] = {}

    async def publish(self, stream: str, group_id: str, data: Any) -> None:
        body = {
            "schema_version": LIVE_SCHEMA_VERSION,
            "after": self._streams.known_head(stream, group_id),
            "ts": time.time(),
            "data": to_json_value(data, what="live record"),
        }
        await self._link.publish(self._names.live_subject(stream, group_id), dumps(body).encode())

    @contextlib.asynccontextmanager
    async def offer(
        self, stream: str, group_id: str, provider: Callable[[], Any]
    ) -> AsyncIterator[None]:
        key = (stream, group_id)
        try:
            with self._offers.offer(key, provider):
                await self._serve(key)
                yield
        finally:
            if not self._offers.offered(key):
                sub = self._serving.pop(key, None)
                if sub is not None:
                    with contextlib.suppress(nats.errors.Error):
                        await sub.unsubscribe()

    async def _serve(self, key: tuple[str, str]) -> None:
        if key in self._serving:
            return
        try:
            sub = await self._link.nc.subscribe(
                self._names.snapshot_subject(*key), cb=self._answerer(key)
            )
        except nats.errors.Error as exc:
            raise unavailable(exc) from None
        if key in self._serving:  # another offer of the group subscribed meanwhile
            await sub.unsubscribe()
        else:
            self._serving[key] = sub

    def _answerer(self, key: tuple[str, str]) -> Callable[[Msg], Any]:
        async def answer(msg: Msg) -> None:
            body = {"schema_version": LIVE_SCHEMA_VERSION, "values": self._offers.values(key)}
            with contextlib.suppress(nats.errors.Error):
                await msg.respond(dumps(body).encode())

        return answer

    async def snapshot(self, stream: str, group_id: str) -> list[StreamRecord]:
        # The head first: a record stored after it was read may follow the snapshot (a message
        # completed meanwhile), never precede it.
        head = await self._streams.head(stream, group_id)
        try:
            reply = await self._link.request(
                self._names.snapshot_subject(stream, group_id), b"", timeout=_SNAPSHOT_TIMEOUT
            )
        except (NoResponders, TimeoutError):
            return []
        values = json.loads(reply.data).get("values", [])
        now = time.time()
        return [StreamRecord(stream, group_id, head, value, now, True) for value in values]
