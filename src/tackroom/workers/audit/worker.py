"""The ``audit`` worker: a hash-chained, append-only audit log of security-relevant facts.

```yaml
worker_config:
  audit:
    path: .tackroom/audit.db        # default: beside an embedded engine's file (a home: in it)
    retention_days: null            # records older than this go to archive_dir (null: kept)
    archive_dir: .tackroom/audit-archive   # default: audit-archive beside the log
    archive_interval_hours: 24      # how often the retention runs (and once at start)
    batch_seconds: 0.05             # a fact waits this long for the next ones: one commit for all
```

It reads ``audit::facts`` from its stored cursor (:mod:`tackroom.workers.audit.reader`): the facts
the event emitter makes of security-relevant events (run starts, gate, approval and budget
decisions, tool calls, run ends: :mod:`tackroom.kit.audit_facts`) and those of the workers that
own other facts (credential use, policy reloads, session deletion). It serves
``audit::append|export|verify|status|archive`` (:mod:`tackroom.contracts.audit`); a query waits
for the facts recorded before the worker started (a ``tackroom audit export`` right after a
``tackroom run`` sees that run). A fact is recorded once (by ``fact_id``). See ``docs/audit.md``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field

from tackroom.contracts.audit import (
    APPEND,
    ARCHIVE,
    EXPORT,
    FACTS,
    FACTS_GROUP,
    STATUS,
    VERIFY,
    AppendRequest,
    AppendResponse,
    ArchiveRequest,
    ArchiveResponse,
    AuditFact,
    AuditStatus,
    ExportPage,
    ExportRequest,
    StatusRequest,
    VerifyReport,
    VerifyRequest,
)
from tackroom.contracts.principal import DEFAULT_TENANT
from tackroom.contracts.tenancy import tenant_of
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import Engine
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.audit.reader import BATCH_SECONDS, FactReader
from tackroom.workers.audit.store import AuditStore

__all__ = ["DEFAULT_PATH", "WORKER", "AuditConfig"]

DEFAULT_PATH = Path(".tackroom") / "audit.db"

T = TypeVar("T")
_log = logging.getLogger("tackroom.audit")


MEMORY = Path(":memory:")


def default_path(engine: object) -> Path:
    """Beside an embedded engine's database file (in its home); in memory beside an in-memory
    engine (a throwaway log for a throwaway engine); else ``.tackroom/audit.db``."""
    if not hasattr(engine, "path"):
        return DEFAULT_PATH
    where = engine.path
    return where.parent / "audit.db" if isinstance(where, Path) else MEMORY


class AuditConfig(WorkerConfig):
    path: Path | None = Field(
        default=None,
        description="the SQLite file (relative: to the working directory); default: beside an"
        " embedded engine's file, else .tackroom/audit.db",
    )
    retention_days: float | None = Field(
        default=None, gt=0, description="days a record is kept before archiving; null: kept"
    )
    archive_dir: Path | None = Field(
        default=None,
        description="where archived records go, one JSONL file per archiving; default:"
        " audit-archive beside the log",
    )
    archive_interval_hours: float = Field(default=24.0, gt=0)
    facts_stream_days: float = Field(
        default=7.0,
        gt=0,
        description="days audit::facts keeps a fact for an audit worker that was down to read",
    )
    batch_seconds: float = Field(
        default=BATCH_SECONDS,
        ge=0,
        le=60,
        description="how long a fact may wait to be recorded with the ones after it, in one"
        " transaction (it is already stored in audit::facts); 0: each at once",
    )


class _Audit:
    def __init__(
        self, engine: Engine, store: AuditStore, config: AuditConfig, reader: FactReader
    ) -> None:
        self.engine = engine
        self.store = store
        beside = store.path.parent if store.path != MEMORY else Path(".tackroom")
        self.archive_dir = (config.archive_dir or beside / "audit-archive").expanduser()
        self.config = config
        self.reader = reader

    async def on_store(self, work: Callable[[AuditStore], T]) -> T:
        await self.reader.caught_up()
        await self.reader.flushed()
        try:
            return await asyncio.to_thread(work, self.store)
        except Exception as exc:  # the disk failed: one line; a trigger delivery is retried
            raise FunctionError("unavailable", f"the audit log failed: {exc}") from None

    async def append(self, request: AppendRequest) -> AppendResponse:
        """Through ``audit::facts`` like every fact, so every log reading it (a replica's) holds
        the same facts in the same order; answered once this log has recorded it."""
        fact = request.fact
        known = await self.on_store(lambda store: store.find(fact.fact_id))
        if known is None:
            seq = await self.engine.append(FACTS.name, FACTS_GROUP, fact.model_dump(mode="json"))
            await self.reader.reached(seq)
            known = await self.on_store(lambda store: store.find(fact.fact_id))
            if known is None:
                raise FunctionError("unavailable", f"fact {fact.fact_id} was not recorded")
            known = dataclasses.replace(known, duplicate=False)
        return AppendResponse(seq=known.seq, hash=known.hash, duplicate=known.duplicate)

    async def export(self, request: ExportRequest) -> ExportPage:
        anchor, head, records = await self.on_store(
            lambda store: store.page(
                after=request.after_seq,
                since=request.since,
                session_id=request.session_id,
                limit=request.limit,
            )
        )
        more = len(records) == request.limit
        last = records[-1]["seq"] if more else None
        if request.tenant is not None:  # the page's cursor stays the unfiltered one
            records = [r for r in records if record_tenant(r) == request.tenant]
        return ExportPage(
            anchor=anchor,
            head_seq=head[0],
            head_hash=head[1],
            records=records,
            next_after=last,
        )

    async def verify(self, request: VerifyRequest) -> VerifyReport:
        return await self.on_store(lambda store: store.verify())

    async def status(self, request: StatusRequest) -> AuditStatus:
        days = self.config.retention_days
        return await self.on_store(lambda store: store.status(retention_days=days))

    async def archive(self, request: ArchiveRequest) -> ArchiveResponse:
        days = request.older_than_days
        if days is None:
            days = self.config.retention_days
        if days is None:
            raise FunctionError(
                "invalid_request",
                "no retention: pass older_than_days, or set worker_config.audit.retention_days",
            )
        return await self.archive_older(days)

    async def archive_older(self, days: float) -> ArchiveResponse:
        directory = self.archive_dir
        moved, target = await self.on_store(
            lambda store: store.archive(older_than=days * 86400.0, directory=directory)
        )
        if target is not None:
            await self.on_store(lambda store: store.append(_archived_fact(moved, target)))
        status = await self.on_store(lambda store: store.status(retention_days=days))
        return ArchiveResponse(
            archived=moved, file=None if target is None else str(target), anchor=status.anchor
        )

    async def run(self) -> None:
        """Read the facts and keep the retention (the worker's owned task); the store closes
        once both have stopped, the reader having recorded the facts it had taken."""
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self.reader.run(), name="audit: read audit::facts")
                tasks.create_task(self.keep_retention(), name="audit: retention")
        except* Exception as failed:  # the failure itself, not a group of one
            raise failed.exceptions[0] from None
        finally:
            self.store.close()

    async def keep_retention(self) -> None:
        """Archive by the retention at start and every ``archive_interval_hours``."""
        while True:
            days = self.config.retention_days
            if days is not None:
                try:
                    await self.archive_older(days)
                except FunctionError as exc:
                    _log.warning("audit: archiving failed: %s", exc)
            await asyncio.sleep(self.config.archive_interval_hours * 3600.0)


def record_tenant(record: dict[str, Any]) -> str:
    """The tenant a record is of: its principal's, else its session's, else the default."""
    principal = record.get("principal")
    if isinstance(principal, dict) and isinstance(principal.get("tenant"), str):
        return str(principal["tenant"])
    session_id = record.get("session_id")
    return tenant_of(session_id) if isinstance(session_id, str) else DEFAULT_TENANT


def _archived_fact(moved: int, target: Path) -> AuditFact:
    return AuditFact(
        fact_id=f"archive:{target.name}",
        kind="records_archived",
        actor="audit",
        fact={"records": moved, "file": str(target)},
    )


async def _start(ctx: WorkerContext[AuditConfig]) -> None:
    path = (ctx.config.path or default_path(ctx.engine)).expanduser()
    store = await asyncio.to_thread(AuditStore.open, path)
    reader = FactReader(
        ctx.engine,
        store,
        keep_days=ctx.config.facts_stream_days,
        batch_seconds=ctx.config.batch_seconds,
    )
    audit = _Audit(ctx.engine, store, ctx.config, reader)
    ctx.spawn(audit.run(), name="audit: facts and retention")
    await ctx.serve(APPEND, audit.append)
    await ctx.serve(EXPORT, audit.export)
    await ctx.serve(VERIFY, audit.verify)
    await ctx.serve(STATUS, audit.status)
    await ctx.serve(ARCHIVE, audit.archive)


WORKER: WorkerSpec[AuditConfig] = WorkerSpec(
    name="audit",
    description="A hash-chained audit log: decisions, tool calls, key use, policy reloads.",
    config_model=AuditConfig,
    start=_start,
)
