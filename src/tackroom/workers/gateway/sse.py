"""A session's typed events as Server-Sent Events, resumable by the engine stream cursor.

Each stored event is ``id: <seq>`` (its sequence in the session's ``agent::events`` group),
``event: <type>`` and ``data: <the stored frame as JSON>``. A client reconnecting with
``Last-Event-ID`` (or ``?after=``) gets the events after it: every event once, none missed.

Live events (``message_update`` deltas, and the ``message_snapshot`` of an answer streaming when
the client connects: :class:`~tackroom.kit.live.LiveFeed`) have **no** ``id:`` line: they are
not stored, so they are no place to resume from, and a client (``EventSource`` included) keeps
the id of the last stored event as its ``Last-Event-ID``. A reconnect mid-answer gets the
snapshot again, then the deltas after it.

Memory stays bounded per client whatever the client does: the next event is read only once the
client took the previous one (the ASGI ``send`` waits while the socket's buffer is full); the
engine subscription keeps at most its own bounded buffer and catches up from storage by cursor
when a reader falls behind; and a client that takes nothing for ``send_timeout`` seconds is
dropped — it resumes with its ``Last-Event-ID``. A gateway that stops closes every stream first,
so each ends cleanly rather than being cut.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse, SendTimeoutError
from starlette.types import Receive, Scope, Send

from tackroom.engine.protocol import Engine
from tackroom.kit.live import LiveFeed
from tackroom.workers.gateway.errors import ApiError

__all__ = ["MAX_CURSOR", "EventStreams", "frame", "parse_cursor"]

_log = logging.getLogger("tackroom.gateway")

_TYPE = re.compile(r"^[a-z_]{1,64}$")
_HEARTBEAT = ServerSentEvent(comment="heartbeat", sep="\n")
MAX_CURSOR = 2**63 - 1


def frame(seq: int | None, data: Any) -> bytes:
    """One event on the wire (compact JSON holds no line break, so ``data`` is one line);
    ``seq`` ``None``: a live event, without an id."""
    kind = data.get("type") if isinstance(data, dict) else None
    event = kind if isinstance(kind, str) and _TYPE.match(kind) else "message"
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if seq is None:
        return f"event: {event}\ndata: {body}\n\n".encode()
    return f"id: {seq}\nevent: {event}\ndata: {body}\n\n".encode()


def parse_cursor(header: str | None) -> int | None:
    """The cursor a ``Last-Event-ID`` header names: a sequence (``None``: no header)."""
    if header is None or header.strip() == "":
        return None
    text = header.strip()
    if not text.isascii() or not text.isdigit() or int(text) > MAX_CURSOR:
        raise ApiError(
            422,
            "invalid_request",
            "Last-Event-ID must be the id of an event (a whole number ≥ 0)",
            details={"field": "header.Last-Event-ID"},
        )
    return int(text)


class _EventStream(EventSourceResponse):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            # a client that takes nothing: it resumes with its Last-Event-ID
            _log.info("gateway: dropped an event stream whose client stopped reading")


class EventStreams:
    """The live SSE streams of one gateway: counted, bounded, and closed together on stop."""

    def __init__(
        self, engine: Engine, *, heartbeat: float, send_timeout: float, max_streams: int
    ) -> None:
        self._engine = engine
        self._heartbeat = heartbeat
        self._send_timeout = send_timeout
        self._max = max_streams
        self._open: set[LiveFeed] = set()
        self._closing = False

    @property
    def live(self) -> int:
        """Streams open now (for tests and the benchmark)."""
        return len(self._open)

    def response(self, session_id: str, *, after: int, run_id: str | None) -> EventSourceResponse:
        if self._closing:
            raise ApiError(503, "unavailable", "the gateway is stopping: reconnect to another")
        if len(self._open) >= self._max:
            raise ApiError(
                503,
                "stream_limit",
                f"this gateway serves {self._max} event streams at most: try again later",
            )
        return _EventStream(
            self._events(session_id, after=after, run_id=run_id),
            ping=self._heartbeat,
            ping_message_factory=lambda: _HEARTBEAT,
            sep="\n",
            send_timeout=self._send_timeout,
            background=None,
        )

    async def _events(
        self, session_id: str, *, after: int, run_id: str | None
    ) -> AsyncIterator[bytes]:
        """Subscribed on first iteration: a response that never starts opens nothing (so the
        limit is checked against open streams, and a burst may pass it by a few)."""
        subscription: LiveFeed | None = None
        try:
            if self._closing:
                return
            subscription = await LiveFeed.open(self._engine, session_id, after=after)
            self._open.add(subscription)
            async for record in subscription:
                data = record.data
                seq = None if record.live else record.seq
                if run_id is None:
                    yield frame(seq, data)
                    continue
                if type(data) is not dict or data.get("run_id") != run_id:
                    continue
                yield frame(seq, data)
                if data.get("type") == "agent_end":
                    return
        finally:
            if subscription is not None:
                self._open.discard(subscription)
                with anyio.CancelScope(shield=True):
                    await subscription.aclose()

    async def close_all(self) -> None:
        """End every stream (its subscription closes, so its response ends normally)."""
        self._closing = True
        for subscription in list(self._open):
            with anyio.CancelScope(shield=True):
                await subscription.aclose()
