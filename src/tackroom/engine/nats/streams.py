"""Event streams: one JetStream stream per tackroom stream, one subject per group.

A record is ``{"schema_version": 1, "seq", "data", "ts"}`` on ``<ns>.ev.<stream>.<group>``.
``seq`` counts per group: an append publishes ``head + 1`` with
``Nats-Expected-Last-Subject-Sequence`` set to the group's last stored message, so concurrent
appenders from any process get distinct, gap-free sequences in stream order (a lost race re-reads
and retries). Retention maps onto JetStream limits: ``max_len`` is ``max_msgs_per_subject`` and
``max_age`` the stream's ``max_age``. The group's head is also kept in the meta bucket
(``head.<stream>.<group>``: ``{"schema_version": 1, "seq"}``), so sequences never restart, even
when every record of a group has expired. An append sends it after the record without waiting
for JetStream's answer (a head is read as the larger of it and the group's last record); a purge
writes it, acknowledged, first.

Reads locate the first record after a cursor by binary search over stream sequences (one direct
get per probe), then read a page with one batch direct get. A subscriber is an ordered push
consumer started at that record: stored records, then live ones, no gap, no duplicate.

A subscriber also listens on the group's core NATS subject ``<ns>.live.<stream>.<group>`` for
frames :meth:`~tackroom.engine.protocol.Engine.publish` sends (:mod:`.live`): each carries
``after``, the group's last sequence its publisher had appended, and waits in the subscription
until the ordered consumer has handed that record out (the two arrive on different
subscriptions, in no fixed order between them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import api

from tackroom.engine.errors import EngineError, EngineUnavailable
from tackroom.engine.jsonvalue import dumps, to_json_value
from tackroom.engine.nats.link import Link, WrongLastSequence
from tackroom.engine.nats.naming import Names
from tackroom.engine.nats.state import Capture, message_seq
from tackroom.engine.protocol import StreamRecord, StreamRetention

__all__ = ["RECORD_SCHEMA_VERSION", "EventStreams", "NatsSubscription", "decode_record"]

RECORD_SCHEMA_VERSION = 1
_PAGE = 1000
_PURGE_TIMEOUT = 10.0
_HELD = 1024
"""Live frames a subscription keeps waiting for their stored record, at most (oldest dropped)."""


@dataclass(frozen=True, slots=True)
class _Head:
    subject_seq: int
    seq: int


def decode_record(stream: str, group_id: str, msg: Msg) -> StreamRecord:
    body = json.loads(msg.data)
    return StreamRecord(stream, group_id, int(body["seq"]), body["data"], float(body["ts"]))


def _head_body(seq: int) -> bytes:
    return dumps({"schema_version": RECORD_SCHEMA_VERSION, "seq": seq}).encode()


def _group_seq(msg: Msg) -> int:
    return int(json.loads(msg.data)["seq"])


class EventStreams:
    def __init__(self, link: Link, names: Names, *, capture: Capture) -> None:
        self._link = link
        self._names = names
        self._capture = capture
        self._ensured: set[str] = set()
        self._heads: dict[tuple[str, str], _Head] = {}

    async def ensure(self, stream: str) -> str:
        """Create the JetStream stream of ``stream`` if needed; returns its name."""
        name = self._names.event_stream(stream)
        if stream in self._ensured:
            return name
        try:
            await self._link.js.stream_info(name)
        except nats.js.errors.NotFoundError:
            await self._link.js.add_stream(
                api.StreamConfig(
                    name=name,
                    subjects=[self._names.event_subjects(stream)],
                    retention=api.RetentionPolicy.LIMITS,
                    storage=api.StorageType.FILE,
                    allow_direct=True,
                    num_replicas=self._link.options.replicas,
                    max_consumers=10_000,  # live subscribers and relays (server default: 1000)
                )
            )
        self._ensured.add(stream)
        return name

    async def configure(self, stream: str, retention: StreamRetention) -> None:
        if retention.max_len is not None and retention.max_len < 1:
            raise ValueError("max_len must be at least 1")
        if retention.max_age is not None and retention.max_age <= 0:
            raise ValueError("max_age must be positive")
        name = await self.ensure(stream)
        info = await self._link.js.stream_info(name)
        config = info.config
        config.max_msgs_per_subject = retention.max_len or -1
        config.max_age = retention.max_age or 0
        if retention.max_age is not None:
            config.duplicate_window = min(120.0, retention.max_age)
        await self._link.js.update_stream(config)

    # -- append ----------------------------------------------------------------------------
    async def _head(self, name: str, stream: str, group_id: str) -> _Head:
        last = await self._link.last_message(name, self._names.event_subject(stream, group_id))
        stored = await self._link.last_message(
            f"KV_{self._names.meta_bucket}", self._head_subject(stream, group_id)
        )
        kept = int(json.loads(stored.data)["seq"]) if stored is not None and stored.data else 0
        if last is None:
            return _Head(0, kept)
        return _Head(message_seq(last), max(kept, _group_seq(last)))

    def known_head(self, stream: str, group_id: str) -> int:
        """The group's last sequence as this process knows it from its own appends (0: none)."""
        head = self._heads.get((stream, group_id))
        return 0 if head is None else head.seq

    async def head(self, stream: str, group_id: str) -> int:
        """The group's last sequence, read from the server."""
        name = await self.ensure(stream)
        return (await self._head(name, stream, group_id)).seq

    async def append(self, stream: str, group_id: str, data: Any) -> int:
        data = to_json_value(data, what="stream record")
        name = await self.ensure(stream)
        key = (stream, group_id)
        head = self._heads.get(key) or await self._head(name, stream, group_id)
        headers = {"Tackroom-Schema-Version": "1"}
        trace = self._capture()
        if trace:
            headers.update(trace)
        while True:
            seq = head.seq + 1
            body = {"schema_version": RECORD_SCHEMA_VERSION, "seq": seq, "data": data}
            body["ts"] = _now()
            headers["Nats-Expected-Last-Subject-Sequence"] = str(head.subject_seq)
            try:
                ack = await self._link.js_publish(
                    self._names.event_subject(stream, group_id),
                    dumps(body).encode(),
                    headers=headers,
                )
            except WrongLastSequence:
                head = await self._head(name, stream, group_id)
                continue
            self._heads[key] = _Head(ack.seq, seq)
            # The kept head matters only once every record of the group is gone (a purge writes
            # it first and waits; see delete_group): sent without waiting for JetStream's answer,
            # after the record on this connection. Lost with the connection, it is caught up by
            # the next append; a head read takes the larger of it and the last record.
            with contextlib.suppress(EngineError):
                await self._link.publish(self._head_subject(stream, group_id), _head_body(seq))
            return seq

    def _head_subject(self, stream: str, group_id: str) -> str:
        return f"$KV.{self._names.meta_bucket}.{self._names.head_key(stream, group_id)}"

    async def delete_group(self, stream: str, group_id: str) -> int:
        """Purge the group's subject; its head in the meta bucket stays, so no sequence repeats
        (written, and acknowledged, before the purge: appends send it without waiting)."""
        name = await self.ensure(stream)
        self._heads.pop((stream, group_id), None)
        head = await self._head(name, stream, group_id)
        await self._link.js_publish(self._head_subject(stream, group_id), _head_body(head.seq))
        try:
            reply = await self._link.request(
                f"$JS.API.STREAM.PURGE.{name}",
                json.dumps({"filter": self._names.event_subject(stream, group_id)}).encode(),
                timeout=_PURGE_TIMEOUT,
            )
        except TimeoutError:
            raise EngineUnavailable("JetStream did not answer a purge in time") from None
        answer: dict[str, Any] = json.loads(reply.data)
        error = answer.get("error")
        if error is not None:
            raise EngineUnavailable(f"JetStream refused a purge: {error.get('description', '')}")
        return int(answer.get("purged", 0))

    # -- read ------------------------------------------------------------------------------
    async def _first_at(self, name: str, subject: str, seq: int) -> Msg | None:
        found = await self._link.direct_get(name, {"seq": seq, "next_by_subj": subject})
        return found[0] if found else None

    async def locate(self, name: str, subject: str, after: int) -> int | None:
        """Stream sequence of the group's first record with ``seq > after`` (None: none yet)."""
        first = await self._first_at(name, subject, 1)
        if first is None:
            return None
        if _group_seq(first) > after:
            return message_seq(first)
        last = await self._link.last_message(name, subject)
        if last is None or _group_seq(last) <= after:
            return None
        lo, hi, hit = message_seq(first), message_seq(last), message_seq(last)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            probe = await self._first_at(name, subject, mid)
            if probe is None:  # trimmed meanwhile: start again from what remains
                return await self.locate(name, subject, after)
            if _group_seq(probe) > after:
                hi, hit = mid, message_seq(probe)
            else:
                lo = message_seq(probe)
        return hit

    async def read(
        self, stream: str, group_id: str, *, after: int, limit: int
    ) -> list[StreamRecord]:
        name = self._names.event_stream(stream)
        subject = self._names.event_subject(stream, group_id)
        start = await self.locate(name, subject, after)
        records: list[StreamRecord] = []
        while start is not None and len(records) < limit:
            page = await self._link.direct_get(
                name,
                {"seq": start, "next_by_subj": subject, "batch": min(_PAGE, limit - len(records))},
            )
            if not page:
                break
            records.extend(r for m in page if (r := decode_record(stream, group_id, m)).seq > after)
            start = message_seq(page[-1]) + 1
        return records[:limit]

    async def subscribe(self, stream: str, group_id: str, *, after: int) -> NatsSubscription:
        subscription = NatsSubscription(self, stream, group_id, after=after)
        await subscription.connect()
        return subscription

    async def follow(
        self, stream: str, group_id: str, *, after: int, deliver: Callable[[Msg], Awaitable[None]]
    ) -> Subscription:
        """An ordered push consumer on the group from its first record after ``after``."""
        name = await self.ensure(stream)
        subject = self._names.event_subject(stream, group_id)
        last_seq = (await self._link.js.stream_info(name)).state.last_seq
        start = await self.locate(name, subject, after)
        if start is None:
            start = last_seq + 1
        return await self._link.js.subscribe(
            subject,
            stream=name,
            cb=deliver,
            ordered_consumer=True,
            config=api.ConsumerConfig(
                deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start
            ),
        )

    async def listen(
        self, stream: str, group_id: str, deliver: Callable[[Msg], Awaitable[None]]
    ) -> Subscription:
        """The group's live frames (core NATS)."""
        return await self._link.nc.subscribe(self._names.live_subject(stream, group_id), cb=deliver)


@dataclass(frozen=True, slots=True)
class _Live:
    after: int
    data: Any
    timestamp: float


def _decode_live(msg: Msg) -> _Live:
    body = json.loads(msg.data)
    return _Live(int(body["after"]), body["data"], float(body["ts"]))


class NatsSubscription:
    """Records of one group after a cursor, stored then live (an ordered consumer), and the
    group's live frames.

    Records wait in a local buffer; a reader ``buffer_limit`` records behind drops the buffer and
    follows again from its cursor (the records are still in the stream; live frames are lost),
    so a stalled reader costs no unbounded memory.
    """

    def __init__(
        self,
        streams: EventStreams,
        stream: str,
        group_id: str,
        *,
        after: int,
        buffer_limit: int = 4096,
    ) -> None:
        self._streams = streams
        self._stream = stream
        self._group_id = group_id
        self._cursor = after
        self._limit = buffer_limit
        self._buffer: asyncio.Queue[Msg | _Live | None] = asyncio.Queue()
        self._held: deque[_Live] = deque()
        self._sub: Subscription | None = None
        self._live_sub: Subscription | None = None
        self._overflow = False
        self._closed = False

    async def connect(self) -> None:
        self._overflow = False
        if self._live_sub is None:
            self._live_sub = await self._streams.listen(
                self._stream, self._group_id, self._deliver_live
            )
        self._sub = await self._streams.follow(
            self._stream, self._group_id, after=self._cursor, deliver=self._deliver
        )

    async def _deliver(self, msg: Msg) -> None:
        self._put(msg)

    async def _deliver_live(self, msg: Msg) -> None:
        try:
            self._put(_decode_live(msg))
        except (ValueError, KeyError, TypeError):
            return  # not a frame this engine sent: nothing to hand out

    def _put(self, item: Msg | _Live) -> None:
        if self._overflow:
            return
        if self._buffer.qsize() >= self._limit:
            self._overflow = True
            self._buffer.put_nowait(None)
            return
        self._buffer.put_nowait(item)

    def __aiter__(self) -> NatsSubscription:
        return self

    async def __anext__(self) -> StreamRecord:
        while not self._closed:
            if self._held and self._held[0].after <= self._cursor:
                return self._live(self._held.popleft())
            item = await self._buffer.get()
            if item is None:
                if self._closed:
                    break
                if self._overflow and self._buffer.empty():
                    self._held.clear()
                    await self._unsubscribe()
                    await self.connect()
                continue
            if isinstance(item, _Live):
                if item.after <= self._cursor and not self._held:
                    return self._live(item)
                self._held.append(item)  # its stored record is still on its way
                if len(self._held) > _HELD:
                    self._held.popleft()
                continue
            record = decode_record(self._stream, self._group_id, item)
            if record.seq > self._cursor:
                self._cursor = record.seq
                return record
        raise StopAsyncIteration

    def _live(self, item: _Live) -> StreamRecord:
        return StreamRecord(
            self._stream, self._group_id, self._cursor, item.data, item.timestamp, True
        )

    async def _unsubscribe(self, *, live: bool = False) -> None:
        subs = [self._sub, self._live_sub] if live else [self._sub]
        self._sub = None
        if live:
            self._live_sub = None
        for sub in subs:
            if sub is not None:
                with contextlib.suppress(nats.errors.Error):
                    await sub.unsubscribe()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._buffer.put_nowait(None)
            await self._unsubscribe(live=True)


def _now() -> float:
    return time.time()
