"""The reader of ``audit::facts``: every fact a worker recorded, none missed, none twice.

A worker may record a fact before the audit worker runs (the policy loads its rules while the
host boots; a credential is used while no audit worker is up), so facts are not taken from a
trigger but read like a log: the records after the stored cursor, then the stream live. Each fact
is appended with its record's sequence in one transaction, so a restart reads on from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from pydantic import ValidationError

from tackroom.contracts.audit import FACTS, FACTS_GROUP, AuditFact
from tackroom.engine.protocol import Engine, StreamRecord, StreamRetention
from tackroom.workers.audit.store import AuditStore

__all__ = ["PAGE", "FactReader"]

PAGE = 200
_RETRY_S = 1.0
_log = logging.getLogger("tackroom.audit")


class FactReader:
    def __init__(self, engine: Engine, store: AuditStore, *, keep_days: float) -> None:
        self._engine = engine
        self._store = store
        self._keep = StreamRetention(max_age=keep_days * 86400.0)
        self._ready = asyncio.Event()
        self._cursor = 0
        self._moved = asyncio.Condition()

    async def reached(self, seq: int) -> None:
        """Return once the record ``seq`` of ``audit::facts`` is in the log."""
        async with self._moved:
            await self._moved.wait_for(lambda: self._cursor >= seq)

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
            for record in records:
                await self._ingest(record)
                cursor = record.seq
            if len(records) < PAGE:
                break
        self._ready.set()
        subscription = await self._engine.subscribe(FACTS.name, FACTS_GROUP, after=cursor)
        try:
            async for record in subscription:
                await self._ingest(record)
        finally:
            await subscription.aclose()

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

    async def _ingest(self, record: StreamRecord) -> None:
        try:
            fact: AuditFact | None = AuditFact.model_validate(record.data)
        except ValidationError as exc:
            _log.warning("audit::facts record %d skipped: %s", record.seq, exc)
            fact = None
        while fact is not None:
            try:
                await asyncio.to_thread(self._store.append, fact, facts_seq=record.seq)
                break
            except Exception as exc:  # a full disk: the fact waits in the stream, retried
                _log.warning("audit::facts record %d not recorded yet: %s", record.seq, exc)
                await asyncio.sleep(_RETRY_S)
        async with self._moved:
            self._cursor = record.seq
            self._moved.notify_all()
