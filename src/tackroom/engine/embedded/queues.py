"""Delivery of durable queue messages for the embedded engine.

One dispatcher task owns delivery: it leases the due head-of-group messages whose function is
served here, runs each in a delivery task it owns, acknowledges (deletes) on success, and on
failure schedules a retry with exponential backoff or buries the message as a dead letter. Leases
live in memory only: this process owns the database file, so after a crash every lease is void
and unacknowledged messages are delivered again.

Writes are shared where they can be: the messages one pass leases are leased in one transaction,
and a delivery's outcome is recorded through the engine's group commit (:mod:`.commits`), with
the writes of whoever else is ready then.

When the database itself fails (a full disk), nothing waits for a visibility timeout: a delivery
the engine failed is retried on the backoff schedule and never dead-lettered for it, an outcome
the store cannot record yet is kept and recorded on the backoff schedule, and each is said in
one warning line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tackroom.engine.embedded.commits import GroupCommitter, Pending
from tackroom.engine.embedded.store import QueuedMessage, Store
from tackroom.engine.errors import EngineCorrupt, EngineStorageError, unavailable_cause
from tackroom.engine.functions import FunctionRegistry, describe_failure
from tackroom.engine.protocol import Invocation, QueueConfig

__all__ = ["QueueDispatcher"]

log = logging.getLogger(__name__)

_BATCH = 256
_IDLE_PURGE_EVERY = 60.0
_STALLED_RETRY = 1.0
_STORAGE = (EngineStorageError, EngineCorrupt)


@dataclass(frozen=True, slots=True)
class _Outcome:
    """How a delivery ended: ``error`` None for success; a failure is retried at ``retry_at``."""

    error: str | None = None
    retry_at: float = 0.0
    engine_failed: bool = False  # the engine's fault, not the handler's: never dead-lettered


@dataclass(eq=False, slots=True)
class _Delivery:
    message: QueuedMessage
    attempt: int
    deadline: float
    task: asyncio.Task[None] | None = None
    lease_lost: bool = False
    settled: bool = field(default=False)
    recording: bool = False  # its outcome waits in a group commit: not settled elsewhere
    outcome: _Outcome | None = None  # set once it ended; kept while the store cannot record it
    unrecorded: int = 0  # attempts to record the outcome that the store refused


class QueueDispatcher:
    def __init__(
        self,
        store: Store,
        registry: FunctionRegistry,
        *,
        committer: GroupCommitter | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._committer = committer
        self._registry = registry
        self._clock = clock
        self._configs: dict[str, QueueConfig] = {}
        self._inflight: dict[str, _Delivery] = {}
        self._busy_groups: set[tuple[str, str]] = set()
        self._running: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False
        self._stalled = False
        self._last_purge = 0.0
        self._changed = True
        """Something may have become deliverable since the last pass (a message, a free slot or
        group, a function served): the next pass reads the store. Otherwise (a lease extended,
        an outcome to record again) only the deadlines moved."""
        self._available_at: float | None = None
        """When the next waiting message becomes due, as the last pass read it."""

    def configure(self, queue: str, config: QueueConfig) -> None:
        if config.max_deliveries < 1 or config.concurrency < 1:
            raise ValueError("max_deliveries and concurrency must be at least 1")
        if config.visibility_timeout <= 0:
            raise ValueError("visibility_timeout must be positive")
        self._configs[queue] = config

    def config(self, queue: str) -> QueueConfig:
        return self._configs.get(queue) or QueueConfig()

    def wake(self) -> None:
        self._changed = True
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
            if delivery.outcome is not None:
                self._settle(delivery)
            elif not delivery.settled:
                with contextlib.suppress(*_STORAGE):  # a restart delivers it again anyway
                    self._store.release_unattempted(delivery.message.id)
        self._inflight.clear()

    # -- the dispatcher loop --------------------------------------------------------------------
    async def _run(self) -> None:
        due = True  # a time came (a message, a deadline): the pass reads the store
        while True:
            self._wake.clear()
            next_due = self._pass() if due or self._changed else self._earliest()
            delay = None if next_due is None else max(0.0, next_due - self._clock())
            due = True
            if delay == 0.0:
                await asyncio.sleep(0)
                continue
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
                due = False
            except TimeoutError:
                pass

    def _pass(self) -> float | None:
        """A dispatch pass; when to come back."""
        self._changed = False
        try:
            next_due = self._dispatch()
            self._say_resumed()
            return next_due
        except _STORAGE as exc:
            self._say_stalled(exc)
        except Exception:  # a bad row must not stop delivery for everything else
            log.exception("queue dispatch failed; retrying in 1s")
        self._changed = True
        return self._clock() + _STALLED_RETRY

    def _say_stalled(self, exc: Exception) -> None:
        if not self._stalled:
            log.warning("queue delivery stalled: %s; retrying every %gs", exc, _STALLED_RETRY)
        self._stalled = True

    def _say_resumed(self) -> None:
        if self._stalled:
            log.warning("queue delivery resumed")
        self._stalled = False

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
            started = self._lease(batch, now)
            for delivery in started:
                delivery.task = asyncio.create_task(
                    self._deliver(delivery), name=f"tackroom-deliver-{delivery.message.function_id}"
                )
            # A full batch may hide due messages of other queues behind ones that just filled
            # their queue: look again without those, until a batch comes back short or idle.
            if len(batch) < _BATCH or not started:
                break
        return self._next_due(served)

    def _lease(self, batch: list[QueuedMessage], now: float) -> list[_Delivery]:
        """Lease what may start of ``batch``, in one transaction; undone if it fails."""
        leased: list[_Delivery] = []
        try:
            with self._store.transaction() if len(batch) > 1 else contextlib.nullcontext():
                for message in batch:
                    config = self.config(message.queue)
                    if self._running.get(message.queue, 0) >= config.concurrency:
                        continue
                    if (
                        message.group is not None
                        and (message.queue, message.group) in self._busy_groups
                    ):
                        continue
                    leased.append(self._hold(message, config, now))
                    self._store.lease(message.id)
        except BaseException:
            for delivery in leased:  # their leases were never stored
                self._unhold(delivery)
            raise
        return leased

    def _saturated(self) -> set[str]:
        return {
            queue
            for queue, running in self._running.items()
            if running >= self.config(queue).concurrency
        }

    def _next_due(self, served: set[str]) -> float | None:
        self._available_at = self._store.next_available_at(served, after=self._clock())
        return self._earliest()

    def _earliest(self) -> float | None:
        """The next deadline of a delivery, or the next waiting message's due time."""
        candidates = [d.deadline for d in self._inflight.values() if not d.settled]
        if self._available_at is not None:
            candidates.append(self._available_at)
        return min(candidates) if candidates else None

    def _hold(self, message: QueuedMessage, config: QueueConfig, now: float) -> _Delivery:
        """Count ``message`` as delivered here (its queue's slot, its group) until released."""
        delivery = _Delivery(message, message.attempts + 1, now + config.visibility_timeout)
        self._inflight[message.id] = delivery
        self._running[message.queue] = self._running.get(message.queue, 0) + 1
        if message.group is not None:
            self._busy_groups.add((message.queue, message.group))
        return delivery

    def _expire_leases(self, now: float) -> None:
        """Settle what is due: outcomes the store refused before, and overrunning handlers."""
        for delivery in list(self._inflight.values()):
            if delivery.settled or delivery.recording or delivery.deadline > now:
                continue
            if delivery.outcome is None:
                delivery.lease_lost = True
                if delivery.task is not None:
                    delivery.task.cancel()
                timeout = self.config(delivery.message.queue).visibility_timeout
                error = f"visibility timeout: still running after {timeout:g}s"
                delivery.outcome = _Outcome(error, retry_at=now)
            self._settle(delivery)

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
            delivery.outcome = self._failure(delivery, exc)
        else:
            delivery.outcome = _Outcome()
        await self._settle_shared(delivery)

    def _failure(self, delivery: _Delivery, exc: Exception) -> _Outcome:
        """The outcome of a handler that raised; a failure the engine caused is said."""
        code, text = describe_failure(exc)
        delay = backoff_delay(self.config(delivery.message.queue), delivery.attempt)
        cause = unavailable_cause(exc)
        if cause is not None:
            log.warning(
                "%s on queue %s failed on attempt %d: %s; retrying in %.2gs",
                delivery.message.function_id,
                delivery.message.queue,
                delivery.attempt,
                cause,
                delay,
            )
        return _Outcome(f"[{code}] {text}", self._clock() + delay, engine_failed=cause is not None)

    async def _extend(self, delivery: _Delivery, seconds: float) -> None:
        if not delivery.settled:
            delivery.deadline = max(delivery.deadline, self._clock() + seconds)
            self._wake.set()

    def _unhold(self, delivery: _Delivery) -> None:
        """Undo :meth:`_hold` (without waking the dispatcher: a lease it could not store is
        tried again on its own schedule)."""
        message = delivery.message
        self._inflight.pop(message.id, None)
        self._running[message.queue] -= 1
        if message.group is not None:
            self._busy_groups.discard((message.queue, message.group))

    def _release(self, delivery: _Delivery) -> None:
        delivery.settled = True
        self._unhold(delivery)
        self.wake()  # its slot and its group are free

    async def _settle_shared(self, delivery: _Delivery) -> None:
        """:meth:`_settle`, with the outcome written in a group commit."""
        outcome = delivery.outcome
        if self._committer is None or delivery.settled or outcome is None:
            self._settle(delivery)
            return
        delivery.recording = True
        # Released as soon as the batch committed, before the writers that shared it go on: an
        # enqueue in the same batch then finds the slot free in the same dispatch pass.
        recorded = Pending(
            lambda: self._record(delivery, outcome), notices=[lambda: self._release(delivery)]
        )
        try:
            await self._committer.commit(recorded)
        except _STORAGE as exc:
            self._keep_unrecorded(delivery, exc)
        finally:
            delivery.recording = False

    def _settle(self, delivery: _Delivery) -> None:
        """Record the delivery's outcome and release it, or keep it while the store refuses."""
        if delivery.settled or delivery.outcome is None:
            return
        try:
            self._record(delivery, delivery.outcome)
        except _STORAGE as exc:
            self._keep_unrecorded(delivery, exc)
            return
        self._release(delivery)

    def _record(self, delivery: _Delivery, outcome: _Outcome) -> None:
        message = delivery.message
        if outcome.error is None:
            self._store.ack(message.id)
            return
        config = self.config(message.queue)
        if delivery.attempt >= config.max_deliveries and not outcome.engine_failed:
            self._store.bury(message.id, error=outcome.error)
            log.warning(
                "dead-lettered %s on queue %s after %d deliveries: %s",
                message.function_id,
                message.queue,
                delivery.attempt,
                outcome.error,
            )
            return
        available_at = max(outcome.retry_at, self._clock())
        self._store.retry_later(message.id, available_at=available_at, error=outcome.error)

    def _keep_unrecorded(self, delivery: _Delivery, exc: Exception) -> None:
        """Hold the delivery (its group, its slot) and try recording again after a backoff,
        rather than after the visibility timeout."""
        delivery.unrecorded += 1
        delay = backoff_delay(self.config(delivery.message.queue), delivery.unrecorded)
        delivery.deadline = self._clock() + delay
        ended = "succeeded" if delivery.outcome and delivery.outcome.error is None else "failed"
        log.warning(
            "could not record that %s on queue %s %s: %s; trying again in %.2gs",
            delivery.message.function_id,
            delivery.message.queue,
            ended,
            exc,
            delay,
        )
        self._wake.set()


def backoff_delay(config: QueueConfig, attempt: int) -> float:
    """Exponential backoff with ±20 % jitter after ``attempt`` failed deliveries."""
    base = min(config.backoff_max, config.backoff_initial * 2 ** (attempt - 1))
    return float(base * random.uniform(0.8, 1.2))
