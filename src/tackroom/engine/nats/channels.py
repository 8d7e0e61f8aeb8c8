"""Channels over NATS subjects, with credit-style flow control that works across processes.

The reader subscribes to ``<ns>.ch.<channel_id>``. The writer sends each frame as a request
``{"schema_version": 1, "kind": "frame", "writer", "seq", "frame"}`` and returns when the reader
answers;
the reader answers at once while fewer than ``capacity`` frames wait unread, and otherwise only
when its iterator has taken one — the reader's buffer is the credit. ``close`` and ``abort``
(``kind`` ``close`` / ``abort``) are answered at once, never waiting for space; a send still
waiting is refused. Answers are ``{"schema_version": 1, "ok": true}`` or ``{..., "ok": false,
"error": "closed"}``. A writer that hears nothing within a few seconds sends the same ``seq``
again (the reader knows each writer's next ``seq``); no subscriber means the reader is gone:
``ChannelClosed``.

A writer in the reader's own process (the common case: a provider worker streaming to the
orchestrator beside it) hands its frames to the reader directly, through the same admission —
order, capacity, close and abort answered the same way — without a round trip through the
server per frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from tackroom.engine.errors import ChannelClosed, EngineError
from tackroom.engine.jsonvalue import dumps, to_json_value
from tackroom.engine.local_channels import ReadEnd
from tackroom.engine.nats.delivery import cancel_if_cancelling
from tackroom.engine.nats.link import Link, NoResponders
from tackroom.engine.nats.naming import Names
from tackroom.engine.protocol import ChannelRef

__all__ = [
    "CHANNEL_SCHEMA_VERSION",
    "LocalNatsChannelWriter",
    "NatsChannel",
    "NatsChannelWriter",
]

CHANNEL_SCHEMA_VERSION = 1
_RESEND_AFTER = 5.0
_NO_READER_PAUSES = (0.01, 0.05, 0.2)
"""Seconds to wait before asking again when the server says nobody reads the channel: a
server (nats-server 2.15 seen) can say so for a moment after the reader's subscription, made
on another connection and flushed, is in place. After the last, the reader is gone."""
_OK = dumps({"schema_version": CHANNEL_SCHEMA_VERSION, "ok": True}).encode()
_CLOSED = dumps({"schema_version": CHANNEL_SCHEMA_VERSION, "ok": False, "error": "closed"}).encode()


Reply = str | asyncio.Future[bool]
"""Where a frame's answer goes: a NATS reply subject, or an in-process writer's future."""


@dataclass(slots=True)
class _Waiting:
    writer: str
    seq: int
    frame: Any
    reply: Reply


class NatsChannel(ReadEnd):
    """The read end: frames in send order, at most ``capacity`` buffered."""

    def __init__(self, link: Link, names: Names, *, capacity: int) -> None:
        super().__init__(capacity=capacity)
        self._link = link
        self._subject = names.channel_subject(self._ref.channel_id)
        self._waiting: deque[_Waiting] = deque()
        self._next_seq: dict[str, int] = {}
        self._sub: Subscription | None = None

    async def open(self) -> None:
        nc = self._link.nc
        self._sub = await nc.subscribe(self._subject, cb=self._on_message)
        await nc.flush()

    async def _taken(self) -> None:
        await self._admit_waiting()

    async def aclose(self) -> None:
        if self._reader_closed:
            return
        self._reader_closed = True
        self._frames.clear()
        self._readable.set()
        await self._refuse_waiting()
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
                await self._link.nc.flush()
            except EngineError:
                pass

    # -- the writer's requests -------------------------------------------------------------
    async def _answer(self, reply: Reply, data: bytes) -> None:
        if isinstance(reply, asyncio.Future):
            if not reply.done():
                reply.set_result(data is _OK)
        elif reply:
            with contextlib.suppress(EngineError):  # the writer asks again, or is gone
                await self._link.publish(reply, data)

    async def _admit_waiting(self) -> None:
        while self._waiting and len(self._frames) < self._capacity:
            waiting = self._waiting.popleft()
            self._frames.append(waiting.frame)
            self._next_seq[waiting.writer] = waiting.seq + 1
            self._readable.set()
            await self._answer(waiting.reply, _OK)

    async def _refuse_waiting(self) -> None:
        while self._waiting:
            await self._answer(self._waiting.popleft().reply, _CLOSED)

    async def _on_message(self, msg: Msg) -> None:
        try:
            body = json.loads(msg.data)
            kind = body["kind"]
            writer = str(body.get("writer", ""))
            seq = int(body["seq"]) if kind == "frame" else 0
        except (ValueError, KeyError, TypeError):
            return
        if kind == "frame":
            await self.take_frame(writer, seq, body.get("frame"), msg.reply)
        else:
            await self.take_end(kind, str(body.get("reason", "")), msg.reply)

    async def take_frame(self, writer: str, seq: int, frame: Any, reply: Reply) -> None:
        """A writer's frame ``seq``: answered once admitted (at once while there is room)."""
        for waiting in self._waiting:
            if (waiting.writer, waiting.seq) == (writer, seq):  # resent while waiting
                waiting.reply = reply
                return
        if seq < self._next_seq.get(writer, 1):
            await self._answer(reply, _OK)  # a resend of an accepted frame
        elif self._reader_closed or self._ended or self._abort_reason is not None:
            await self._answer(reply, _CLOSED)
        else:
            self._waiting.append(_Waiting(writer, seq, frame, reply))
            await self._admit_waiting()

    async def take_end(self, kind: str, reason: str, reply: Reply) -> None:
        """A writer's ``close`` or ``abort``: answered at once, refusing the sends that wait."""
        if self._reader_closed or self._ended or self._abort_reason is not None:
            await self._answer(reply, _CLOSED)
            return
        if kind == "abort":
            self._abort_reason = reason
        else:
            self._ended = True
        self._readable.set()
        await self._refuse_waiting()
        await self._answer(reply, _OK)


class _Writer:
    """What both write ends share: frames numbered per writer, one send at a time, one end."""

    def __init__(self) -> None:
        self._writer = uuid.uuid4().hex[:16]
        self._seq = 0
        self._closed = False
        self._sending = asyncio.Lock()

    async def send(self, frame: Any) -> None:
        if self._closed:
            raise ChannelClosed("this channel is already closed")
        frame = to_json_value(frame, what="channel frame")
        async with self._sending:
            if self._closed:
                raise ChannelClosed("this channel is already closed")
            self._seq += 1
            await self._frame(self._seq, frame)

    async def close(self) -> None:
        await self._end("close", "")

    async def abort(self, reason: str) -> None:
        await self._end("abort", reason)

    async def _end(self, kind: str, reason: str) -> None:
        if self._closed:
            raise ChannelClosed("this channel is already closed")
        self._closed = True
        await self._finish(kind, reason)

    async def _frame(self, seq: int, frame: Any) -> None:
        raise NotImplementedError

    async def _finish(self, kind: str, reason: str) -> None:
        raise NotImplementedError


class NatsChannelWriter(_Writer):
    """The write end, usable from any process that has the ``ChannelRef``."""

    def __init__(self, link: Link, names: Names, ref: ChannelRef) -> None:
        super().__init__()
        self._link = link
        self._subject = names.channel_subject(ref.channel_id)

    async def _frame(self, seq: int, frame: Any) -> None:
        await self._request({"kind": "frame", "writer": self._writer, "seq": seq, "frame": frame})

    async def _finish(self, kind: str, reason: str) -> None:
        await self._request({"kind": kind, "reason": reason} if kind == "abort" else {"kind": kind})

    async def _request(self, body: dict[str, Any]) -> None:
        data = dumps({"schema_version": CHANNEL_SCHEMA_VERSION, **body}).encode()
        pauses = iter(_NO_READER_PAUSES)
        while True:
            try:
                reply = await self._link.request(self._subject, data, timeout=_RESEND_AFTER)
            except NoResponders:
                pause = next(pauses, None)
                if pause is None:
                    raise ChannelClosed("the channel's reader is gone or closed") from None
                await asyncio.sleep(pause)
                continue
            except TimeoutError:
                cancel_if_cancelling()
                continue  # still no room, or the answer was lost: ask again
            answer = json.loads(reply.data)
            if not answer.get("ok"):
                raise ChannelClosed("the channel is closed")
            return


class LocalNatsChannelWriter(_Writer):
    """The write end in the reader's own process: each frame goes to the reader directly and
    is answered as a frame sent through the server would be."""

    def __init__(self, channel: NatsChannel) -> None:
        super().__init__()
        self._channel = channel

    async def _frame(self, seq: int, frame: Any) -> None:
        answer = asyncio.get_running_loop().create_future()
        await self._channel.take_frame(self._writer, seq, frame, answer)
        await self._answered(answer)

    async def _finish(self, kind: str, reason: str) -> None:
        answer = asyncio.get_running_loop().create_future()
        await self._channel.take_end(kind, reason, answer)
        await self._answered(answer)

    @staticmethod
    async def _answered(answer: asyncio.Future[bool]) -> None:
        if not await answer:
            raise ChannelClosed("the channel is closed")
