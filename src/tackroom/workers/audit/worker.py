"""The ``audit`` worker: a hash-chained, append-only audit log of security-relevant facts.

```yaml
worker_config:
  audit:
    path: .tackroom/audit.db        # relative: to the working directory (a home: under it)
    retention_days: null            # records older than this go to archive_dir (null: kept)
    archive_dir: .tackroom/audit-archive
    archive_interval_hours: 24      # how often the retention runs (and once at start)
```

It records facts from two streams through durable stream triggers — ``agent::events`` (gate,
approval and budget decisions, tool calls, run ends: :mod:`tackroom.workers.audit.facts`) and
``audit::facts`` (credential use, policy reloads, session deletion, from the workers that own
them) — and serves ``audit::append|export|verify|status|archive``
(:mod:`tackroom.contracts.audit`). A trigger delivery that fails (a full disk) is retried by the
engine; one delivered twice is recorded once (by ``fact_id``). See ``docs/audit.md``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, ValidationError

from tackroom.contracts.audit import (
    APPEND,
    ARCHIVE,
    EXPORT,
    FACTS,
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
from tackroom.contracts.events import EVENTS
from tackroom.engine.errors import FunctionError
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.audit.facts import fact_of, principal_of
from tackroom.workers.audit.store import AuditStore

__all__ = ["DEFAULT_PATH", "ON_EVENT", "ON_FACT", "WORKER", "AuditConfig"]

DEFAULT_PATH = Path(".tackroom") / "audit.db"
ON_EVENT = "audit::on_event"
"""The worker's own stream trigger on ``agent::events``; nobody else calls it."""
ON_FACT = "audit::on_fact"
"""The worker's own stream trigger on ``audit::facts``; nobody else calls it."""

T = TypeVar("T")
_AUDITED = frozenset(
    {
        "turn_state_changed",
        "gate_decision",
        "approval_resolved",
        "budget_decision",
        "function_execution_start",
        "function_execution_end",
        "agent_end",
    }
)
_log = logging.getLogger("tackroom.audit")


class AuditConfig(WorkerConfig):
    path: Path = Field(
        default=DEFAULT_PATH, description="the SQLite file (relative: to the working directory)"
    )
    retention_days: float | None = Field(
        default=None, gt=0, description="days a record is kept before archiving; null: kept"
    )
    archive_dir: Path = Field(
        default=Path(".tackroom") / "audit-archive",
        description="where archived records go, one JSONL file per archiving",
    )
    archive_interval_hours: float = Field(default=24.0, gt=0)


class _Audit:
    def __init__(self, store: AuditStore, config: AuditConfig) -> None:
        self.store = store
        self.config = config

    async def on_store(self, work: Callable[[AuditStore], T]) -> T:
        try:
            return await asyncio.to_thread(work, self.store)
        except Exception as exc:  # the disk failed: one line; a trigger delivery is retried
            raise FunctionError("unavailable", f"the audit log failed: {exc}") from None

    async def on_event(self, payload: dict[str, Any]) -> None:
        data = payload.get("data")
        if not isinstance(data, dict) or data.get("type") not in _AUDITED:
            return  # streamed text and the like: nothing to record, nothing to parse
        try:
            event = EVENTS.parse(data)
        except ValidationError:
            return  # a frame of a newer writer: its known facts come in its known types
        principal = principal_of(event)
        if principal is not None:
            run_id = event.run_id
            await self.on_store(lambda store: store.learn_principal(run_id, principal))
        fact = fact_of(event)
        if fact is not None:
            await self.on_store(lambda store: store.append(fact))

    async def on_fact(self, payload: dict[str, Any]) -> None:
        try:
            fact = AuditFact.model_validate(payload.get("data"))
        except ValidationError as exc:
            _log.warning("audit::facts record %s skipped: %s", payload.get("seq"), exc)
            return
        await self.on_store(lambda store: store.append(fact))

    async def append(self, request: AppendRequest) -> AppendResponse:
        done = await self.on_store(lambda store: store.append(request.fact))
        return AppendResponse(seq=done.seq, hash=done.hash, duplicate=done.duplicate)

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
        return ExportPage(
            anchor=anchor,
            head_seq=head[0],
            head_hash=head[1],
            records=records,
            next_after=records[-1]["seq"] if more else None,
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
        directory = self.config.archive_dir.expanduser()
        moved, target = await self.on_store(
            lambda store: store.archive(older_than=days * 86400.0, directory=directory)
        )
        if target is not None:
            await self.on_store(lambda store: store.append(_archived_fact(moved, target)))
        status = await self.on_store(lambda store: store.status(retention_days=days))
        return ArchiveResponse(
            archived=moved, file=None if target is None else str(target), anchor=status.anchor
        )

    async def keep_retention(self) -> None:
        """Archive by the retention at start and every ``archive_interval_hours``; close the
        store when cancelled (the worker's owned task)."""
        try:
            while True:
                days = self.config.retention_days
                if days is not None:
                    try:
                        await self.archive_older(days)
                    except FunctionError as exc:
                        _log.warning("audit: archiving failed: %s", exc)
                await asyncio.sleep(self.config.archive_interval_hours * 3600.0)
        finally:
            self.store.close()


def _archived_fact(moved: int, target: Path) -> AuditFact:
    return AuditFact(
        fact_id=f"archive:{target.name}",
        kind="records_archived",
        actor="audit",
        fact={"records": moved, "file": str(target)},
    )


async def _start(ctx: WorkerContext[AuditConfig]) -> None:
    path = ctx.config.path.expanduser()
    store = await asyncio.to_thread(AuditStore.open, path)
    audit = _Audit(store, ctx.config)
    ctx.spawn(audit.keep_retention(), name="audit: retention")
    await ctx.register_function(ON_EVENT, audit.on_event, description="audit: agent::events")
    await ctx.register_function(ON_FACT, audit.on_fact, description="audit: audit::facts")
    await ctx.serve(APPEND, audit.append)
    await ctx.serve(EXPORT, audit.export)
    await ctx.serve(VERIFY, audit.verify)
    await ctx.serve(STATUS, audit.status)
    await ctx.serve(ARCHIVE, audit.archive)
    await ctx.add_stream_trigger(EVENTS.name, ON_EVENT)
    await ctx.add_stream_trigger(FACTS.name, ON_FACT)


WORKER: WorkerSpec[AuditConfig] = WorkerSpec(
    name="audit",
    description="A hash-chained audit log: decisions, tool calls, key use, policy reloads.",
    config_model=AuditConfig,
    start=_start,
)
