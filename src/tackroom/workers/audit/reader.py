"""The reader of ``audit::facts``: every fact a worker recorded, none missed, none twice.

A worker may record a fact before the audit worker runs (the policy loads its rules while the
host boots; a credential is used while no audit worker is up), so facts are not taken from a
trigger but read like a log: the records after the stored cursor, then the stream live. The facts
read are appended with the last record's sequence in one transaction, so a restart reads on from
there. Live facts are taken in batches: a fact waits up to ``batch_seconds`` for the ones after
it, so a turn's five facts cost one commit and one thread hop, not five (they are already
durable in the stream). Whoever waits for a fact (:meth:`FactReader.reached`, a query through
:meth:`FactReader.flushed`) cuts the wait short, and stopping records what was taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from pydantic import ValidationError

from tackroom.contracts.audit import FACTS, FACTS_GROUP, AuditFact
from tackroom.engine.protocol import Engine, StreamRecord, StreamRetention, Subscription
from tackroom.workers.audit.store import AuditStore

__all__ = ["BATCH_SECONDS", "PAGE", "FactReader"]

PAGE = 200
BATCH_SECONDS = 0.05
"""How long a live fact may wait for the ones after it, to be recorded in one transaction."""
_RETRY_S = 1.0
_log = logging.getLogger("tackroom.audit")


class FactReader:
    def __init__(
        self,
        engine: Engine,
        store: AuditStore,
        *,
        keep_days: float,
        batch_seconds: float = BATCH_SECONDS,
    ) -> None:
        self._engine = engine
        self._store = store
        self._keep = StreamRetention(max_age=keep_days * 86400.0)
        self._batch_seconds = batch_seconds
        self._ready = asyncio.Event()
        self._cursor = 0
        self._moved = asyncio.Condition()
        self._taken: list[StreamRecord] = []
        self._arrived = asyncio.Event()
        self._hurry = asyncio.Event()
        self._wanted = 0
        self._received = 0
        self._ended = False

    @property
    def received(self) -> int:
        """The last record of ``audit::facts`` taken live (recorded or about to be)."""
        return self._received

    async def reached(self, seq: int) -> None:
        """Return once the record ``seq`` of ``audit::facts`` is in the log."""
        if self._cursor >= seq:
            return
        self._wanted = max(self._wanted, seq)
        self._hurry.set()
        async with self._moved:
            await self._moved.wait_for(lambda: self._cursor >= seq)

    async def flushed(self) -> None:
        """Return once every fact read so far is in the log (a query's read-your-writes)."""
        await self.reached(self._received)

    async def caught_up(self, *, wait: float = 30.0) -> None:
        """Return once the facts recorded before the reader started are in the log (or after
        ``wait`` seconds: then a query answers what is stored so far)."""
        if not self._ready.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), wait)

    async def run(self) -> None:
        try:
            await self._engine.configure_stream(FACTS.name, self._keep)
        except Exception as exc:  # a read-only engine: it only reads
            _log.debug("audit::facts retention not set: %s", exc)
        cursor = await self._checked(await asyncio.to_thread(self._store.facts_cursor))
        while True:
            records = await self._engine.read(FACTS.name, FACTS_GROUP, after=cursor, limit=PAGE)
            if records:
                await self._ingest(records)
                cursor = records[-1].seq
            if len(records) < PAGE:
                break
        self._ready.set()
        subscription = await self._engine.subscribe(FACTS.name, FACTS_GROUP, after=cursor)
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._take(subscription), name="audit: take audit::facts")
                await self._record_taken()
        except* Exception as failed:  # the subscription's own error, not a group of one
            raise failed.exceptions[0] from None
        finally:
            await subscription.aclose()

    async def _take(self, subscription: Subscription) -> None:
        try:
            async for record in subscription:
                self._taken.append(record)
                self._received = record.seq
                self._arrived.set()
        finally:
            self._ended = True
            self._arrived.set()

    async def _record_taken(self) -> None:
        """Record the facts taken, a batch at a time, until the subscription ends or the task is
        cancelled; then those left (once: a fact not recorded then is read again at start)."""
        try:
            while not (self._ended and not self._taken):
                await self._arrived.wait()
                if self._batch_seconds > 0 and not self._hurry.is_set() and not self._ended:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._hurry.wait(), self._batch_seconds)
                await self._record_batch(retry=True)
        except asyncio.CancelledError:
            while self._taken and await self._record_batch(retry=False):
                pass
            raise

    async def _record_batch(self, *, retry: bool) -> bool:
        """Record the first page taken; ``False`` if it could not be (``retry`` off)."""
        batch = self._taken[:PAGE]
        recorded = not batch or await self._ingest(batch, retry=retry)
        if recorded:
            del self._taken[: len(batch)]
        if not self._taken and not self._ended:
            self._arrived.clear()
        if self._wanted <= self._cursor:
            self._hurry.clear()
        return recorded

    async def _checked(self, cursor: int) -> int:
        """``cursor``, or 0 when the stream holds records before it but not the one at it: the
        log was kept with another engine (or the stream was reset). Reading it all again costs
        nothing twice: a known fact is recorded once."""
        if cursor == 0 or await self._engine.read(
            FACTS.name, FACTS_GROUP, after=cursor - 1, limit=1
        ):
            return cursor
        first = await self._engine.read(FACTS.name, FACTS_GROUP, after=0, limit=1)
        if first and first[0].seq > cursor:
            _log.warning(
                "audit::facts records %d..%d are gone (past the stream's retention) before the"
                " audit log read them",
                cursor + 1,
                first[0].seq - 1,
            )
            return cursor
        if first:
            _log.warning("audit::facts is shorter than the log's cursor %d: reading it all", cursor)
        return 0

    async def _in_thread(self, facts: list[AuditFact], last: int) -> None:
        try:
            await asyncio.to_thread(self._store.append_read, facts, facts_seq=last)
        except RuntimeError as exc:
            if "shutdown" not in str(exc):
                raise
            # The loop is ending (asyncio.run shut its executor down while this was reading):
            # record on the loop, as a stop does.
            self._store.append_read(facts, facts_seq=last)

    async def _ingest(self, records: list[StreamRecord], *, retry: bool = True) -> bool:
        """Record ``records`` in a thread, retried every second while the disk fails; with
        ``retry`` off (stopping), on the loop and once: ``False`` if that failed, and they are
        read again at the next start."""
        facts: list[AuditFact] = []
        for record in records:
            try:
                facts.append(AuditFact.model_validate(record.data))
            except ValidationError as exc:
                _log.warning("audit::facts record %d skipped: %s", record.seq, exc)
        last = records[-1].seq
        while True:
            try:
                if retry:
                    await self._in_thread(facts, last)
                else:  # stopping: the loop may have shut its executor down already
                    self._store.append_read(facts, facts_seq=last)
                break
            except Exception as exc:  # a full disk: the facts wait in the stream, retried
                _log.warning("audit::facts records to %d not recorded yet: %s", last, exc)
                if not retry:
                    return False
                await asyncio.sleep(_RETRY_S)
        async with self._moved:
            self._cursor = last
            self._moved.notify_all()
        return True
