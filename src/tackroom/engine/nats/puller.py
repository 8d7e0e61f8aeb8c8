"""Pull requests on a JetStream consumer, answered on an inbox of the puller's own.

The puller keeps one pull request open at a time (``batch`` messages, expiring after ``wait``
seconds): the server delivers a message the moment it is stored, and a backlog a batch at a time.
``pull`` returns as soon as anything has arrived — not when the batch is full, as nats-py's
``fetch(n)`` does — and the request stays open for the rest of its batch. ``on_arrival`` sees each
message as it lands, so its lease can be renewed from then on.

Every request has its own reply token (status answers name it); a message that answers an earlier
request is kept for the next ``pull``, never dropped. Unsubscribing removes the inbox's interest,
and the server then drops a request still waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable

import nats.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from tackroom.engine.nats.link import Link

__all__ = ["Puller"]

_END_STATUSES = ("404", "408", "409")


class Puller:
    def __init__(
        self, link: Link, stream: str, consumer: str, *, on_arrival: Callable[[Msg], None]
    ) -> None:
        self._link = link
        self._next = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._on_arrival = on_arrival
        self._inbox = ""
        self._tokens = itertools.count(1)
        self._current = ""
        self._remaining = 0
        self._open = False
        self._ready: list[Msg] = []
        self._changed = asyncio.Event()
        self._sub: Subscription | None = None

    async def open(self) -> None:
        nc = self._link.nc
        self._inbox = nc.new_inbox()
        self._sub = await nc.subscribe(f"{self._inbox}.*", cb=self._on_message)

    async def close(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()

    async def _on_message(self, msg: Msg) -> None:
        status = msg.headers.get("Status") if msg.headers else None
        if status is None:
            # A delivered message shows the subject it was stored under, not the reply token:
            # count it against the open request (only one is open at a time).
            self._ready.append(msg)
            self._on_arrival(msg)
            self._remaining -= 1
            self._open = self._open and self._remaining > 0
        elif msg.subject == self._current and status.startswith(_END_STATUSES):
            self._open = False
        else:
            return  # an idle heartbeat, or the end of an earlier request
        self._changed.set()

    async def pull(self, batch: int, *, wait: float) -> list[Msg]:
        """What has arrived; if nothing, wait up to ``wait`` seconds for the first message."""
        if not self._ready and not self._open:
            token = str(next(self._tokens))
            self._current = f"{self._inbox}.{token}"
            self._remaining, self._open = batch, True
            request = {"batch": batch, "expires": int(wait * 1_000_000_000)}
            await self._link.nc.publish(
                self._next, json.dumps(request).encode(), reply=self._current
            )
        if not self._ready:
            try:
                async with asyncio.timeout(wait + 1.0):
                    while not self._ready and self._open:
                        self._changed.clear()
                        await self._changed.wait()
            except TimeoutError:
                self._open = False  # the request was lost (a reconnect): make a new one
        taken, self._ready = self._ready, []
        return taken
