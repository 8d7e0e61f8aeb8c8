"""The trace store's reader: ``traces::spans`` records into the SQLite store, none missed.

It opens the store (off the event loop), reads the records after the stored cursor page by page
(what was appended while no store ran — the stream keeps a day), then follows the stream live.
Each record is stored with its sequence in one transaction. Queries wait for the first catch-up
(:attr:`SpanReader.ready`), so a ``tackroom traces`` right after a run sees that run.

A record that does not validate is skipped with a warning; a store that cannot be opened or
written makes the queries answer ``unavailable`` with the reason — tracing never stops a host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from pydantic import ValidationError

from tackroom.contracts.traces import SPANS, SPANS_GROUP, SpanBatch
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import Engine, StreamRecord, StreamRetention
from tackroom.workers.traces.store import Retention, StoreError, TraceStore

__all__ = ["PAGE", "STREAM_RETENTION", "SpanReader"]

PAGE = 100
STREAM_RETENTION = StreamRetention(max_age=24 * 3600.0)
"""How long ``traces::spans`` keeps a record for a store that was not running to catch up."""

_log = logging.getLogger("tackroom.traces")


class SpanReader:
    def __init__(self, engine: Engine, *, path: Path, retention: Retention) -> None:
        self._engine = engine
        self._path = path
        self._retention = retention
        self._store: TraceStore | None = None
        self._problem: str | None = None
        self.ready = asyncio.Event()
        """Set once the records stored before the reader started have been read (or the
        store failed to open)."""

    async def store(self, *, wait: float = 10.0) -> TraceStore:
        """The open store once caught up (waiting up to ``wait`` s for the catch-up)."""
        if not self.ready.is_set():
            with contextlib.suppress(TimeoutError):  # still catching up: answer what is stored
                await asyncio.wait_for(self.ready.wait(), wait)
        if self._store is None:
            reason = self._problem or "the trace store is still opening"
            raise FunctionError("unavailable", reason)
        return self._store

    async def run(self) -> None:
        """Open the store, catch up, then follow the stream until cancelled."""
        try:
            self._store = await asyncio.to_thread(
                TraceStore.open, self._path, retention=self._retention
            )
        except StoreError as exc:
            self._problem = str(exc)
            _log.error("%s", exc)
            self.ready.set()
            return
        try:
            await self._keep_a_day()
            cursor = await self._catch_up(self._store.cursor())
            self.ready.set()
            subscription = await SPANS.subscribe(self._engine, SPANS_GROUP, after=cursor)
            try:
                async for record in subscription:
                    await self._ingest(record)
            finally:
                await subscription.aclose()
        finally:
            self.ready.set()
            store, self._store = self._store, None
            self._problem = "the trace store is closed"
            store.close()

    async def _keep_a_day(self) -> None:
        """Bound the stream (a read-only engine, a command's, cannot: it only reads)."""
        try:
            await self._engine.configure_stream(SPANS.name, STREAM_RETENTION)
        except Exception as exc:
            _log.debug("traces::spans retention not set: %s", exc)

    async def _catch_up(self, cursor: int) -> int:
        while True:
            records = await self._engine.read(SPANS.name, SPANS_GROUP, after=cursor, limit=PAGE)
            for record in records:
                await self._ingest(record)
                cursor = record.seq
            if len(records) < PAGE:
                return cursor

    async def _ingest(self, record: StreamRecord) -> None:
        store = self._store
        if store is None:
            return
        try:
            batch = SpanBatch.model_validate(record.data)
        except ValidationError as exc:
            _log.warning("traces::spans record %d skipped: %s", record.seq, exc)
            batch = SpanBatch()
        try:
            await asyncio.to_thread(store.ingest, batch, seq=record.seq)
        except Exception as exc:  # a full disk, say: the spans are lost, the host goes on
            _log.warning("traces::spans record %d not stored: %s", record.seq, exc)
