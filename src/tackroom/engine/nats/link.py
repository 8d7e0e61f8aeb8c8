"""The engine's one NATS connection: requests through its own reply inbox, direct gets, reconnects.

Requests (function calls, JetStream publishes, direct gets, channel frames) are answered on one
wildcard inbox this module owns, so that a dropped connection fails every call in flight at once
with :class:`EngineUnavailable` instead of letting each wait for its timeout. Likewise a request
the server refuses for the user's permissions (it says so in an ``-ERR``, and drops the request)
fails at once with :class:`PermissionDenied`. Reconnect listeners run, in tasks the link owns,
after the client has reconnected (its subscriptions are back).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

import nats
from tackroom.engine.errors import EngineClosed, EngineError, EngineUnavailable, PermissionDenied
from tackroom.engine.nats import leader_reads
from tackroom.engine.nats.naming import NatsOptions

__all__ = [
    "JetStreamError",
    "Link",
    "NoResponders",
    "PermissionDenied",
    "PubAck",
    "WrongLastSequence",
    "unavailable",
]

log = logging.getLogger(__name__)

_JS_TIMEOUT = 5.0
_WRONG_LAST_SEQUENCE = (10071, 10164)
_VIOLATION = re.compile(r'permissions violation for (publish|subscription) to "([^"]*)"')
"""nats-py hands ``-ERR`` texts to the error callback lower-cased."""


class NoResponders(EngineError):
    """Nobody subscribes to the subject a request went to."""

    code = "no_responders"


class JetStreamError(EngineError):
    """JetStream refused a publish or an API call."""

    code = "jetstream_error"

    def __init__(self, err_code: int, description: str) -> None:
        self.err_code = err_code
        super().__init__(f"JetStream error {err_code}: {description}")


class WrongLastSequence(JetStreamError):
    """A compare-and-set publish found another last sequence on its subject."""


@dataclass(frozen=True, slots=True)
class PubAck:
    seq: int
    duplicate: bool


@dataclass(eq=False, slots=True)
class _Waiter:
    future: asyncio.Future[list[Msg]]
    batch: bool
    subject: str
    messages: list[Msg] = field(default_factory=list)


def _status(msg: Msg) -> str | None:
    return msg.headers.get("Status") if msg.headers else None


def unavailable(exc: BaseException) -> EngineUnavailable:
    return EngineUnavailable(f"NATS is unreachable: {type(exc).__name__}: {exc}".rstrip(": "))


class Link:
    def __init__(self, options: NatsOptions) -> None:
        self.options = options
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._inbox = ""
        self._tokens = itertools.count(1)
        self._waiters: dict[str, _Waiter] = {}
        self._listeners: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.connected = asyncio.Event()
        self.closing = False
        self._credentials_refused = asyncio.Event()
        self.refused: list[tuple[str, str]] = []
        """``(publish|subscription, subject)`` the server refused this user, lower-cased."""

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect, or fail within ``connect_timeout`` with one line saying NATS is unreachable
        (the client itself would retry a server that never answers forever, silently), or at
        once when the server refuses the URL's credentials."""
        deadline = self.options.connect_timeout
        extra: dict[str, Any] = {}
        if self.options.inbox_prefix is not None:
            extra["inbox_prefix"] = self.options.inbox_prefix
        try:
            self._nc = await self._first_connection(
                nats.connect(
                    servers=list(self.options.servers),
                    name=f"tackroom-{os.getpid()}",
                    connect_timeout=min(2.0, deadline),
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.25,
                    ping_interval=5,
                    max_outstanding_pings=3,
                    disconnected_cb=self._on_disconnected,
                    reconnected_cb=self._on_reconnected,
                    error_cb=self._on_error,
                    **extra,
                ),
                timeout=deadline,
            )
        except PermissionDenied:
            raise
        except TimeoutError:
            raise EngineUnavailable(
                f"NATS is unreachable: no server at {self.options.redacted()} answered within"
                f" {deadline:g} s (is nats-server running with -js? the URL's connect_timeout"
                " sets the wait)"
            ) from None
        except Exception as exc:  # NoServersError, OSError...
            raise unavailable(exc) from None
        self._js = self._nc.jetstream(timeout=_JS_TIMEOUT)
        self._inbox = self._nc.new_inbox()
        await self._nc.subscribe(f"{self._inbox}.*", cb=self._on_reply)
        try:
            # A refusal of the inbox comes before the PONG of a PING sent after the SUB; nats-py
            # writes a flush's PING ahead of commands still pending, so the first flush may
            # overtake the SUB, and the second follows it.
            await self._nc.flush()
            await self._nc.flush()
        except nats.errors.Error as exc:
            raise unavailable(exc) from None
        if self.refused:
            await self.close()
            raise PermissionDenied(
                f"NATS refused this user a subscription to its reply inbox {self._inbox!r}:"
                " set the URL's inbox_prefix to the one its permissions allow"
                " (`tackroom nats config` prints the URL)"
            )
        self.connected.set()

    async def _first_connection(
        self, connect: Coroutine[Any, Any, Client], timeout: float
    ) -> Client:
        """``connect``, unless the server refuses the credentials first (the client would try
        them again forever) or ``timeout`` passes (``TimeoutError``)."""
        connecting = asyncio.ensure_future(connect)
        refused = asyncio.ensure_future(self._credentials_refused.wait())
        try:
            await asyncio.wait(
                (connecting, refused), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (connecting, refused):
                task.cancel()
            await asyncio.gather(connecting, refused, return_exceptions=True)
        if not connecting.cancelled():  # connected or failed, maybe just as the wait ended
            return connecting.result()
        if self._credentials_refused.is_set():
            raise PermissionDenied(
                f"NATS refused the credentials of {self.options.redacted()} (Authorization"
                " Violation): check the user and password in the URL"
            )
        raise TimeoutError

    async def close(self) -> None:
        self.closing = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._fail_waiters(EngineClosed("the engine is closed"))
        if self._nc is not None and not self._nc.is_closed:
            try:
                await asyncio.wait_for(self._nc.close(), 5)
            except Exception:  # closing an already broken connection
                log.debug("NATS close failed", exc_info=True)

    @property
    def nc(self) -> Client:
        if self._nc is None or self._nc.is_closed:
            raise EngineClosed("the engine is not running")
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        if self._js is None:
            raise EngineClosed("the engine is not running")
        return self._js

    def on_reconnect(self, listener: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
        """Run ``listener`` after every reconnect; returns a function that stops that."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def spawn(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        """Run ``coro`` in a task this link owns (cancelled and awaited at close)."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _on_disconnected(self) -> None:
        self.connected.clear()
        if not self.closing:
            log.warning("lost the NATS connection; reconnecting")
            self._fail_waiters(
                EngineUnavailable("the NATS connection dropped; the call may or may not have run")
            )

    async def _on_reconnected(self) -> None:
        self.connected.set()
        log.warning("reconnected to NATS")
        for listener in list(self._listeners):
            self.spawn(listener(), name="tackroom-nats-reconnect")

    async def _on_error(self, exc: Exception) -> None:
        if "authorization violation" in str(exc).lower() and not self.connected.is_set():
            self._credentials_refused.set()
        violation = _VIOLATION.search(str(exc))
        if violation is None:
            log.debug("NATS client error: %s: %s", type(exc).__name__, exc)
            return
        action, subject = violation.groups()
        self.refused.append((action, subject))
        del self.refused[:-100]
        log.warning("NATS refused this user's %s to %r (server permissions)", action, subject)
        if action == "publish":  # the request is dropped: fail it now rather than at its timeout
            denied = PermissionDenied(f"NATS refused: this user may not publish to {subject!r}")
            for token, waiter in list(self._waiters.items()):
                # The server's text comes lower-cased: a request to a subject differing only in
                # case, in flight at this moment, fails too (function ids are rarely such twins).
                if waiter.subject.lower() == subject and not waiter.future.done():
                    self._waiters.pop(token, None)
                    waiter.future.set_exception(denied)

    def _fail_waiters(self, exc: EngineError) -> None:
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            if not waiter.future.done():
                waiter.future.set_exception(exc)

    # -- requests --------------------------------------------------------------------------
    async def _on_reply(self, msg: Msg) -> None:
        token = msg.subject[len(self._inbox) + 1 :]
        waiter = self._waiters.get(token)
        if waiter is None or waiter.future.done():
            return
        status = msg.headers.get("Status") if msg.headers else None
        if status == "503":
            self._waiters.pop(token, None)
            waiter.future.set_exception(NoResponders("no responders"))
        elif not waiter.batch:
            self._waiters.pop(token, None)
            waiter.future.set_result([msg])
        elif status is None:
            waiter.messages.append(msg)
        else:  # 204 end of batch, 404 nothing found, 413 too many, 408 request timeout
            self._waiters.pop(token, None)
            waiter.future.set_result([*waiter.messages, msg])

    async def _request(
        self,
        subject: str,
        data: bytes,
        *,
        headers: dict[str, str] | None,
        timeout: float,
        batch: bool,
    ) -> list[Msg]:
        nc = self.nc
        if not self.connected.is_set():
            raise EngineUnavailable("not connected to NATS")
        token = str(next(self._tokens))
        waiter = _Waiter(asyncio.get_running_loop().create_future(), batch, subject)
        self._waiters[token] = waiter
        try:
            await nc.publish(subject, data, reply=f"{self._inbox}.{token}", headers=headers)
            async with asyncio.timeout(timeout):
                return await waiter.future
        except nats.errors.Error as exc:
            raise unavailable(exc) from None
        finally:
            self._waiters.pop(token, None)

    async def request(
        self, subject: str, data: bytes, *, headers: dict[str, str] | None = None, timeout: float
    ) -> Msg:
        """One request, one reply. ``TimeoutError`` after ``timeout``; ``NoResponders``."""
        [reply] = await self._request(subject, data, headers=headers, timeout=timeout, batch=False)
        return reply

    async def publish(
        self, subject: str, data: bytes, *, headers: dict[str, str] | None = None
    ) -> None:
        try:
            await self.nc.publish(subject, data, headers=headers)
        except nats.errors.Error as exc:
            raise unavailable(exc) from None

    # -- JetStream -------------------------------------------------------------------------
    async def js_publish(
        self, subject: str, data: bytes, *, headers: dict[str, str] | None = None
    ) -> PubAck:
        try:
            reply = await self._stored_publish(subject, data, headers=headers)
        except NoResponders:
            raise EngineUnavailable(f"no JetStream stream stores {subject!r}") from None
        except TimeoutError:
            raise EngineUnavailable("JetStream did not acknowledge a publish in time") from None
        answer: dict[str, Any] = json.loads(reply.data)
        error = answer.get("error")
        if error is not None:
            err_code = int(error.get("err_code", 0))
            cls = WrongLastSequence if err_code in _WRONG_LAST_SEQUENCE else JetStreamError
            raise cls(err_code, str(error.get("description", "")))
        return PubAck(seq=int(answer["seq"]), duplicate=bool(answer.get("duplicate", False)))

    async def _stored_publish(
        self, subject: str, data: bytes, *, headers: dict[str, str] | None
    ) -> Msg:
        """The publish's request; on a replicated namespace, a "no responders" is asked again
        for a while: a stream just created takes writes only once its replicas elected a
        leader, and nothing was stored meanwhile, so repeating cannot duplicate."""
        deadline = asyncio.get_running_loop().time() + _JS_TIMEOUT
        while True:
            try:
                return await self.request(subject, data, headers=headers, timeout=_JS_TIMEOUT)
            except NoResponders:
                if not self.replicated or asyncio.get_running_loop().time() >= deadline:
                    raise
            await asyncio.sleep(0.05)

    async def direct_get(self, stream: str, query: dict[str, Any]) -> list[Msg]:
        """A (batch) direct get: the stored messages that match, oldest first; on a replicated
        namespace, never older than the last acknowledged write (:mod:`.leader_reads`)."""
        if not self.replicated:
            return await self._stored(stream, query)
        if "batch" not in query:
            return await leader_reads.leader_get(self, stream, query)
        seq = int(query.get("seq", 0))

        def complete(page: list[Msg], fence: int) -> bool:
            # A full page is complete as it stands; the next page is fenced again.
            return (
                fence < seq or len(page) >= int(query["batch"]) or leader_reads.reaches(page, fence)
            )

        return await leader_reads.fenced(
            self,
            stream,
            str(query["next_by_subj"]),
            lambda: self._stored(stream, query),
            complete=complete,
        )

    @property
    def replicated(self) -> bool:
        """Whether a stream has followers, whose direct gets may lag its leader."""
        return self.options.replicas > 1

    async def _stored(self, stream: str, query: dict[str, Any]) -> list[Msg]:
        return [m for m in await self._direct_get(stream, query) if not _status(m)]

    async def _direct_get(self, stream: str, query: dict[str, Any]) -> list[Msg]:
        subject = f"$JS.API.DIRECT.GET.{stream}"
        batch = "batch" in query or "multi_last" in query
        try:
            return await self._request(
                subject, json.dumps(query).encode(), headers=None, timeout=_JS_TIMEOUT, batch=batch
            )
        except NoResponders:
            return []  # the stream does not exist (yet)
        except TimeoutError:
            raise EngineUnavailable("JetStream did not answer a read in time") from None

    async def last_per_subject(self, stream: str, filter_subject: str) -> list[Msg]:
        """The last message of every subject matching ``filter_subject``.

        One batch direct get; past the server's cap on subjects per request (413), an ordered
        consumer with ``DeliverPolicy.LAST_PER_SUBJECT`` reads them instead.
        """
        if not self.replicated:
            return await self._last_per_subject(stream, filter_subject)
        return await leader_reads.fenced(
            self,
            stream,
            filter_subject,
            lambda: self._last_per_subject(stream, filter_subject),
            complete=leader_reads.reaches,
        )

    async def _last_per_subject(self, stream: str, filter_subject: str) -> list[Msg]:
        found = await self._direct_get(stream, {"multi_last": [filter_subject], "batch": 100_000})
        if not (found and _status(found[-1]) == "413"):
            return [m for m in found if not _status(m)]
        messages: list[Msg] = []
        done = asyncio.Event()

        async def collect(msg: Msg) -> None:
            messages.append(msg)
            if msg.metadata.num_pending == 0:
                done.set()

        try:
            sub = await self.js.subscribe(
                filter_subject,
                stream=stream,
                cb=collect,
                ordered_consumer=True,
                deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
            )
            try:
                info = await sub.consumer_info()
                # The server may have pushed every message before this answer while the callback
                # has run on none yet (num_pending 0, nothing collected): what the server
                # delivered says whether there is anything to wait for, not what was collected.
                sent = info.delivered.consumer_seq if info.delivered is not None else 0
                if info.num_pending or sent or messages:
                    await asyncio.wait_for(done.wait(), 60)
            finally:
                await sub.unsubscribe()
        except nats.errors.Error as exc:
            raise unavailable(exc) from None
        return messages

    async def last_message(self, stream: str, subject: str) -> Msg | None:
        found = await self.direct_get(stream, {"last_by_subj": subject})
        return found[0] if found else None
