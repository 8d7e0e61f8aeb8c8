"""Delivery of queue messages from JetStream pull consumers.

For every ``(queue, function)`` pair whose function this process serves, it pulls from
``partitions + 1`` durable consumers on the work-queue stream: one per partition of grouped
messages (``max_ack_pending=1``: one message of the partition at a time, so a group's messages
run one by one in order, retries included — a NAK with delay keeps the message pending), and one
for messages without a group (many at once). ``concurrency`` bounds the handlers this process
runs per queue.

The consumer's ``ack_wait`` is short (at most ``MAX_LEASE``) and a held message is kept with
``in_progress()`` heartbeats, so a crashed worker's message comes back within seconds while a live
one keeps it until its ``visibility_timeout`` (which ``extend_visibility`` pushes back). At the
deadline the handler is cancelled and the message NAKed for immediate redelivery. A failure NAKs
with the backoff delay; the ``max_deliveries``-th failure moves the message to the dead letters.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import nats.errors
from nats.aio.msg import Msg
from nats.js import api

from tackroom.engine.embedded.queues import backoff_delay
from tackroom.engine.errors import EngineError, unavailable_cause
from tackroom.engine.functions import FunctionRegistry, describe_failure
from tackroom.engine.nats.link import Link
from tackroom.engine.nats.naming import Names
from tackroom.engine.nats.puller import Puller
from tackroom.engine.protocol import Invocation, QueueConfig

__all__ = ["MAX_LEASE", "MESSAGE_ID_HEADER", "Dispatcher", "Held", "cancel_if_cancelling"]

log = logging.getLogger(__name__)

MAX_LEASE = 5.0
MESSAGE_ID_HEADER = "Tackroom-Message-Id"
_FETCH_WAIT = 5.0
_UNGROUPED_PENDING = 10_000

Bury = Callable[["Held", int, str], Awaitable[None]]


@dataclass(eq=False, slots=True)
class Held:
    """A fetched message this process holds, decoded."""

    msg: Msg
    queue: str
    envelope: dict[str, Any]

    @property
    def message_id(self) -> str:
        headers = self.msg.headers or {}
        return headers.get(MESSAGE_ID_HEADER) or f"q-{self.msg.metadata.sequence.stream}"

    @property
    def trace_headers(self) -> dict[str, str] | None:
        headers = self.msg.headers or {}
        found = {k: v for k, v in headers.items() if k in ("traceparent", "tracestate", "baggage")}
        return found or None


class _Slots:
    """Handlers running for one queue in this process, at most ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self._changed = asyncio.Condition()

    async def wait_free(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.running < self.limit)

    async def acquire(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.running < self.limit)
            self.running += 1

    async def release(self) -> None:
        async with self._changed:
            self.running -= 1
            self._changed.notify_all()

    async def resize(self, limit: int) -> None:
        async with self._changed:
            self.limit = limit
            self._changed.notify_all()


def lease_of(config: QueueConfig) -> float:
    return min(config.visibility_timeout, MAX_LEASE)


class Dispatcher:
    def __init__(
        self,
        link: Link,
        names: Names,
        registry: FunctionRegistry,
        *,
        partitions: int,
        config: Callable[[str], QueueConfig],
        bury: Bury,
    ) -> None:
        self._link = link
        self._names = names
        self._registry = registry
        self._partitions = partitions
        self._config = config
        self._bury = bury
        self.pairs: set[tuple[str, str]] = set()
        self._loops: dict[tuple[str, str], list[asyncio.Task[None]]] = {}
        self._deliveries: set[asyncio.Task[None]] = set()
        self._slots: dict[str, _Slots] = {}
        self._closing = False

    # -- which pairs to pull ---------------------------------------------------------------
    def add_pair(self, queue: str, function_id: str) -> None:
        self.pairs.add((queue, function_id))
        if function_id in self._registry:
            self._start(queue, function_id)

    def served(self, function_id: str) -> None:
        for queue, fid in list(self.pairs):
            if fid == function_id:
                self._start(queue, fid)

    async def unserved(self, function_id: str) -> None:
        stopping = [pair for pair in self._loops if pair[1] == function_id]
        tasks = [task for pair in stopping for task in self._loops.pop(pair)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _start(self, queue: str, function_id: str) -> None:
        if self._closing or (queue, function_id) in self._loops:
            return
        lanes = [str(p) for p in range(self._partitions)] + ["n"]
        self._loops[(queue, function_id)] = [
            self._link.spawn(self._pull(queue, function_id, lane), name=f"tackroom-pull-{lane}")
            for lane in lanes
        ]

    def _consumer_config(self, queue: str, function_id: str, lane: str) -> api.ConsumerConfig:
        config = self._config(queue)
        return api.ConsumerConfig(
            durable_name=self._names.queue_consumer(queue, function_id, lane),
            filter_subject=self._names.queue_subject(queue, function_id, lane),
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_wait=lease_of(config),
            max_deliver=-1,
            max_ack_pending=_UNGROUPED_PENDING if lane == "n" else 1,
            num_replicas=self._link.options.replicas,
        )

    async def configure(self, queue: str, config: QueueConfig) -> None:
        slots = self._slots.get(queue)
        if slots is not None:
            await slots.resize(config.concurrency)
        for q, function_id in list(self._loops):
            if q == queue:
                lanes = [str(p) for p in range(self._partitions)] + ["n"]
                await asyncio.gather(
                    *(
                        self._link.js.add_consumer(
                            self._names.queue_stream,
                            self._consumer_config(queue, function_id, lane),
                        )
                        for lane in lanes
                    )
                )

    def _queue_slots(self, queue: str) -> _Slots:
        slots = self._slots.get(queue)
        if slots is None:
            slots = self._slots[queue] = _Slots(self._config(queue).concurrency)
        return slots

    # -- pulling ---------------------------------------------------------------------------
    async def _pull(self, queue: str, function_id: str, lane: str) -> None:
        stream = self._names.queue_stream
        consumer = self._names.queue_consumer(queue, function_id, lane)
        while True:
            try:
                await self._link.js.add_consumer(
                    stream, self._consumer_config(queue, function_id, lane)
                )
                break
            except (nats.errors.Error, EngineError) as exc:
                cancel_if_cancelling()
                log.debug("cannot create queue consumer yet (%s); retrying", exc)
                await asyncio.sleep(0.5)
        slots = self._queue_slots(queue)
        keepers: dict[int, asyncio.Task[None]] = {}

        def keep(msg: Msg) -> None:  # renew the lease from the moment the message lands
            lease = lease_of(self._config(queue))
            keepers[id(msg)] = self._link.spawn(_keep(msg, lease), name="tackroom-lease")

        puller = Puller(self._link, stream, consumer, on_arrival=keep)
        await puller.open()
        try:
            while True:
                cancel_if_cancelling()
                batch = 1
                if lane == "n":
                    await slots.wait_free()
                    batch = max(1, slots.limit - slots.running)
                try:
                    msgs = await puller.pull(batch, wait=_FETCH_WAIT)
                except (nats.errors.Error, EngineError) as exc:
                    cancel_if_cancelling()
                    log.debug("pull failed (%s); retrying", exc)
                    await asyncio.sleep(0.25)
                    continue
                for msg in msgs:
                    await self._accept(msg, queue, slots, keepers.pop(id(msg)))
        finally:
            await puller.close()
            for keeper in keepers.values():
                keeper.cancel()

    async def _accept(
        self, msg: Msg, queue: str, slots: _Slots, keeper: asyncio.Task[None]
    ) -> None:
        try:
            envelope = json.loads(msg.data)
        except ValueError:
            envelope = None
        held = Held(msg, queue, envelope if isinstance(envelope, dict) else {})
        try:
            await slots.acquire()
        except BaseException:
            keeper.cancel()
            raise
        task = asyncio.create_task(self._deliver(held, slots, keeper), name="tackroom-deliver")
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _deliver(self, held: Held, slots: _Slots, keeper: asyncio.Task[None]) -> None:
        config = self._config(held.queue)
        attempt = held.msg.metadata.num_delivered
        try:
            if "function_id" not in held.envelope:
                await self._bury(held, attempt, "invalid message: not a tackroom queue envelope")
            elif attempt > config.max_deliveries:
                await self._bury(
                    held,
                    config.max_deliveries,
                    "visibility timeout: the worker holding it stopped renewing its lease",
                )
            else:
                await self._run(held, config, attempt)
        except asyncio.CancelledError:
            if self._closing:
                await _quietly(held.msg.nak())
            raise
        except EngineError as exc:  # the connection dropped while settling
            log.warning("could not settle a queue message: %s", exc)
        finally:
            keeper.cancel()
            await slots.release()

    async def _run(self, held: Held, config: QueueConfig, attempt: int) -> None:
        envelope = held.envelope
        function_id = str(envelope["function_id"])
        deadline = asyncio.timeout(config.visibility_timeout)
        loop = asyncio.get_running_loop()

        async def extend(seconds: float) -> None:
            when = deadline.when()
            target = loop.time() + seconds
            if when is not None and target > when and not deadline.expired():
                deadline.reschedule(target)

        invocation = Invocation(
            function_id=function_id,
            kind=envelope.get("kind", "queue"),
            attempt=attempt,
            message_id=held.message_id,
            group=envelope.get("group"),
            _extend=extend,
        )
        error: str | None = None
        retry_delay = 0.0
        try:
            async with deadline:
                await self._registry.invoke(
                    function_id,
                    envelope.get("payload"),
                    kind=invocation.kind,
                    invocation=invocation,
                    headers=held.trace_headers,
                )
        except TimeoutError as exc:
            if not deadline.expired():
                error, retry_delay = _failed(held.queue, function_id, attempt, config, exc)
            else:
                error = f"visibility timeout: still running after {config.visibility_timeout:g}s"
        except Exception as exc:
            error, retry_delay = _failed(held.queue, function_id, attempt, config, exc)
        if error is None:
            await held.msg.ack()
        elif attempt >= config.max_deliveries:
            await self._bury(held, attempt, error)
        else:
            await held.msg.nak(delay=retry_delay or None)

    async def close(self) -> None:
        self._closing = True
        loops = [task for tasks in self._loops.values() for task in tasks]
        self._loops.clear()
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        deliveries = list(self._deliveries)
        for task in deliveries:
            task.cancel()
        await asyncio.gather(*deliveries, return_exceptions=True)


def cancel_if_cancelling() -> None:
    """Re-raise a cancellation that ``asyncio.wait_for`` (3.11) turned into a timeout."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _failed(
    queue: str, function_id: str, attempt: int, config: QueueConfig, exc: BaseException
) -> tuple[str, float]:
    """The error to record and the backoff delay; a failure the engine caused is said."""
    code, text = describe_failure(exc)
    delay = backoff_delay(config, attempt)
    cause = unavailable_cause(exc)
    if cause is not None:
        log.warning(
            "%s on queue %s failed on attempt %d: %s; retrying in %.2gs",
            function_id,
            queue,
            attempt,
            cause,
            delay,
        )
    return f"[{code}] {text}", delay


async def _keep(msg: Msg, lease: float) -> None:
    """Renew a held message's lease until cancelled (the delivery settles it)."""
    while True:
        await asyncio.sleep(lease / 3)
        await _quietly(msg.in_progress())


async def _quietly(awaitable: Awaitable[None]) -> None:
    try:
        await awaitable
    except Exception:  # best effort: the server redelivers if this is lost
        log.debug("lease message failed", exc_info=True)
