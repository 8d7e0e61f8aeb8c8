"""Group commit: writers that are ready together share one SQLite transaction.

Every write of the embedded engine — a unit of work at the end of its block, or a plain
``set_state`` / ``update_state`` / ``delete_state`` / ``append`` / ``enqueue`` — is handed to the
:class:`GroupCommitter` as a :class:`Pending`. When nothing else is ready to run on the event
loop it is written at once, in its own transaction: a lone writer waits for nobody. Otherwise it
joins the batch of the current loop turn, which one callback writes when the tasks already
scheduled have run (or the last writer to join, when nothing but that callback is left to run):
every writer that reached its commit meanwhile shares that transaction, and
they all go on together in the next loop turn (writers that move in step tend to reach their next
commit together again). Each writer's writes run in its own context: the trace context a trigger
delivery captures is its writer's. A writer cancelled before its batch is written is left out.

Each pending write keeps its own all-or-nothing semantics. Its ``check`` (compare-and-set, an
update's ops) runs inside the batch, after the writes of those before it: one that fails gets its
error and writes nothing, and the rest of the batch goes on. No other process writes the file
(see :mod:`.files`) and a batch runs without yielding, so a check made this way is as good as one
made under a lock; the transaction takes the write lock only at the first write that passed its
checks, so a batch whose checks all fail writes and commits nothing. Anything
else that fails — a full disk, a crash — fails the whole batch: it is rolled back, and every
writer in it gets the error (nothing of the batch is written). A writer returns only once its
batch committed, so durability is what it was; notices (subscribers, the queue dispatcher) run
after the commit, in commit order.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tackroom.engine.embedded.store import Store
from tackroom.engine.errors import InvalidPayload, InvalidUpdate, RevisionConflict

__all__ = ["GroupCommitter", "Notice", "Pending"]

_log = logging.getLogger(__name__)

Notice = Callable[[], None]
"""What to tell others once the transaction committed (subscribers, the queue dispatcher)."""

OWN_FAILURES = (RevisionConflict, InvalidUpdate, InvalidPayload)
"""What a check may raise: the writer's own failure, not the batch's."""


@dataclass(eq=False, slots=True)
class Pending:
    """One writer's writes, waiting for a transaction.

    ``check`` runs first, inside the batch (it may raise one of :data:`OWN_FAILURES`: then
    nothing of this writer is written); ``write`` then writes and returns the writer's result.
    """

    write: Callable[[], Any]
    check: Callable[[], None] | None = None
    notices: list[Notice] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None
    waiter: asyncio.Future[None] | None = None
    context: contextvars.Context | None = None
    """The writer's context, when a loop callback writes its batch."""


class GroupCommitter:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._batch: list[Pending] | None = None
        self._flush: asyncio.Handle | None = None
        """The callback that writes the batch."""
        self.heads: dict[tuple[str, str], int] = {}
        """During a transaction: the last sequence each stream group got in it."""

    async def commit(self, pending: Pending) -> Any:
        """Write ``pending`` (alone, or with the others ready now); its result, or its error."""
        ready = _ready_queue()
        batch = self._batch
        if batch is None and ready is not None and not ready:
            self._run([pending])
        elif (
            batch is not None and ready is not None and len(ready) == 1 and ready[0] is self._flush
        ):
            # Only the batch's own callback is left to run: nobody else can join it now.
            batch.append(pending)
            self.flush()
        else:
            loop = asyncio.get_running_loop()
            if self._batch is None:
                self._batch = []
                self._flush = loop.call_soon(self.flush, context=contextvars.Context())
            pending.context = contextvars.copy_context()
            pending.waiter = loop.create_future()
            self._batch.append(pending)
            await pending.waiter  # cancelled before the batch is written: left out of it
        if pending.error is not None:
            raise pending.error
        return pending.result

    def flush(self) -> None:
        """Write the batch gathered so far (the loop callback; also at close)."""
        batch, self._batch = self._batch, None
        if self._flush is not None:
            self._flush.cancel()  # when written before its turn came
            self._flush = None
        if not batch:
            return
        batch = [p for p in batch if p.waiter is None or not p.waiter.cancelled()]
        try:
            self._run(batch)
        finally:
            for pending in batch:
                if pending.waiter is not None and not pending.waiter.done():
                    pending.waiter.set_result(None)

    def _run(self, batch: list[Pending]) -> None:
        """Check and write ``batch`` in one transaction, then run its notices in order."""
        store = self._store
        wrote = False
        store.begin(immediate=False)  # checks read in it; the first write takes the lock
        try:
            for pending in batch:
                if pending.check is not None:
                    try:
                        _within(pending, pending.check)
                    except OWN_FAILURES as exc:
                        pending.error = exc
                        continue
                pending.result = _within(pending, pending.write)
                wrote = True
            if wrote:
                if self.heads:
                    store.put_heads(self.heads)
                store.commit()
            else:
                store.rollback()  # only reads: nothing to commit
        except BaseException as exc:
            store.rollback()
            for pending in batch:
                if pending.error is None:
                    pending.error = exc
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            if self.heads:
                self.heads.clear()
        for pending in batch:
            if pending.error is None:
                for notice in pending.notices:
                    try:
                        _within(pending, notice)
                    except Exception:  # committed: a listener's failure is not the writer's
                        _log.exception("a notice after a commit failed")


def _within(pending: Pending, call: Callable[[], Any]) -> Any:
    return call() if pending.context is None else pending.context.run(call)


def _ready_queue() -> deque[object] | None:
    """The callbacks scheduled to run on the running loop before anything else happens. A
    writer that comes while none is, or only its batch's own, can be written at once: no other
    writer could reach its commit first. CPython's event loops keep them as ``_ready``; for a
    loop without one (``None``) writes always wait for one loop turn (a few microseconds)."""
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    return ready if isinstance(ready, deque) else None
