"""Delivery of durable queue messages for the embedded engine.

One dispatcher task owns delivery: it leases the due head-of-group messages whose function is
served here, runs each in a delivery task it owns, acknowledges (deletes) on success, and on
failure schedules a retry with exponential backoff or buries the message as a dead letter. Leases
live in memory only: this process owns the database file, so after a crash every lease is void
and unacknowledged messages are delivered again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tackroom.engine.embedded.store import QueuedMessage, Store
from tackroom.engine.functions import FunctionRegistry, describe_failure
from tackroom.engine.protocol import Invocation, QueueConfig

__all__ = ["QueueDispatcher"]

log = logging.getLogger(__name__)

_BATCH = 256
_IDLE_PURGE_EVERY = 60.0


@dataclass(eq=False, slots=True)
class _Delivery:
    message: QueuedMessage
    attempt: int
    deadline: float
    task: asyncio.Task[None] | None = None
    lease_lost: bool = False
    settled: bool = field(default=False)


class QueueDispatcher:
    def __init__(
        self,
        store: Store,
        registry: FunctionRegistry,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._registry = registry
        self._clock = clock
        self._configs: dict[str, QueueConfig] = {}
        self._inflight: dict[str, _Delivery] = {}
        self._busy_groups: set[tuple[str, str]] = set()
        self._running: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False
        self._last_purge = 0.0

    def configure(self, queue: str, config: QueueConfig) -> None:
        if config.max_deliveries < 1 or config.concurrency < 1:
            raise ValueError("max_deliveries and concurrency must be at least 1")
        if config.visibility_timeout <= 0:
            raise ValueError("visibility_timeout must be positive")
        self._configs[queue] = config

    def config(self, queue: str) -> QueueConfig:
        return self._configs.get(queue) or QueueConfig()

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._store.release_all_leases()
        self._loop_task = asyncio.create_task(self._run(), name="tackroom-queue-dispatcher")

    async def close(self) -> None:
        self._closing = True
        tasks = [d.task for d in self._inflight.values() if d.task is not None]
        if self._loop_task is not None:
            tasks.append(self._loop_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for delivery in list(self._inflight.values()):
            if not delivery.settled:
                self._store.release_unattempted(delivery.message.id)
        self._inflight.clear()

    # -- the dispatcher loop --------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                next_due = self._dispatch()
            except Exception:  # a bad row must not stop delivery for everything else
                log.exception("queue dispatch failed; retrying in 1s")
                next_due = self._clock() + 1.0
            delay = None if next_due is None else max(0.0, next_due - self._clock())
            if delay == 0.0:
                await asyncio.sleep(0)
                continue
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _dispatch(self) -> float | None:
        now = self._clock()
        self._expire_leases(now)
        if now - self._last_purge > _IDLE_PURGE_EVERY:
            self._store.purge_dedupe(now=now)
            self._last_purge = now
        served = self._registry.served()
        while True:
            batch = self._store.ready_messages(
                now=now, function_ids=served, skip_queues=self._saturated(), limit=_BATCH
            )
            started = 0
            for message in batch:
                config = self.config(message.queue)
                if self._running.get(message.queue, 0) >= config.concurrency:
                    continue
                if (
                    message.group is not None
                    and (message.queue, message.group) in self._busy_groups
                ):
                    continue
                self._start(message, config, now)
                started += 1
            # A full batch may hide due messages of other queues behind ones that just filled
            # their queue: look again without those, until a batch comes back short or idle.
            if len(batch) < _BATCH or started == 0:
                break
        return self._next_due(served)

    def _saturated(self) -> set[str]:
        return {
            queue
            for queue, running in self._running.items()
            if running >= self.config(queue).concurrency
        }

    def _next_due(self, served: set[str]) -> float | None:
        candidates = [d.deadline for d in self._inflight.values() if not d.settled]
        available = self._store.next_available_at(served, after=self._clock())
        if available is not None:
            candidates.append(available)
        return min(candidates) if candidates else None

    def _start(self, message: QueuedMessage, config: QueueConfig, now: float) -> None:
        self._store.lease(message.id)
        delivery = _Delivery(message, message.attempts + 1, now + config.visibility_timeout)
        self._inflight[message.id] = delivery
        self._running[message.queue] = self._running.get(message.queue, 0) + 1
        if message.group is not None:
            self._busy_groups.add((message.queue, message.group))
        delivery.task = asyncio.create_task(
            self._deliver(delivery), name=f"tackroom-deliver-{message.function_id}"
        )

    def _expire_leases(self, now: float) -> None:
        for delivery in list(self._inflight.values()):
            if not delivery.settled and delivery.deadline <= now:
                delivery.lease_lost = True
                if delivery.task is not None:
                    delivery.task.cancel()
                timeout = self.config(delivery.message.queue).visibility_timeout
                self._settle_failure(
                    delivery, f"visibility timeout: still running after {timeout:g}s", delay=0.0
                )

    # -- one delivery -------------------------------------------------------------------------
    async def _deliver(self, delivery: _Delivery) -> None:
        message = delivery.message
        invocation = Invocation(
            function_id=message.function_id,
            kind=message.kind,
            attempt=delivery.attempt,
            message_id=message.id,
            group=message.group,
            _extend=lambda seconds: self._extend(delivery, seconds),
        )
        try:
            await self._registry.invoke(
                message.function_id,
                message.payload,
                kind=message.kind,
                invocation=invocation,
                headers=message.headers,
            )
        except asyncio.CancelledError:
            if self._closing or not delivery.lease_lost:
                raise
            return
        except Exception as exc:
            code, text = describe_failure(exc)
            self._settle_failure(delivery, f"[{code}] {text}", delay=None)
        else:
            self._settle_success(delivery)

    async def _extend(self, delivery: _Delivery, seconds: float) -> None:
        if not delivery.settled:
            delivery.deadline = max(delivery.deadline, self._clock() + seconds)
            self._wake.set()

    def _release(self, delivery: _Delivery) -> None:
        delivery.settled = True
        message = delivery.message
        self._inflight.pop(message.id, None)
        self._running[message.queue] -= 1
        if message.group is not None:
            self._busy_groups.discard((message.queue, message.group))
        self._wake.set()

    def _settle_success(self, delivery: _Delivery) -> None:
        if delivery.settled:
            return
        self._store.ack(delivery.message.id)
        self._release(delivery)

    def _settle_failure(self, delivery: _Delivery, error: str, *, delay: float | None) -> None:
        if delivery.settled:
            return
        config = self.config(delivery.message.queue)
        if delivery.attempt >= config.max_deliveries:
            self._store.bury(delivery.message.id, error=error)
            log.warning(
                "dead-lettered %s on queue %s after %d deliveries: %s",
                delivery.message.function_id,
                delivery.message.queue,
                delivery.attempt,
                error,
            )
        else:
            if delay is None:
                delay = backoff_delay(config, delivery.attempt)
            self._store.retry_later(
                delivery.message.id, available_at=self._clock() + delay, error=error
            )
        self._release(delivery)


def backoff_delay(config: QueueConfig, attempt: int) -> float:
    """Exponential backoff with ±20 % jitter after ``attempt`` failed deliveries."""
    base = min(config.backoff_max, config.backoff_initial * 2 ** (attempt - 1))
    return float(base * random.uniform(0.8, 1.2))
