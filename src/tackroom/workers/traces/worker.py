"""The ``traces`` worker: a trace store — spans of every worker in SQLite, queried by trace, run
or session.

```yaml
tracing:
  exporters: [bus]            # every process ships its spans to traces::spans (+ otlp, console)
worker_config:
  traces:
    path: .tackroom/traces.db # relative: to the working directory; a harness home puts it there
    max_age_hours: 168        # traces that ended longer ago are deleted (null: kept)
    max_spans: 200000         # then the oldest traces until at most this many spans remain
```

It reads the stream ``traces::spans`` (see :mod:`tackroom.contracts.traces`) into the file and
serves ``traces::list``, ``traces::get`` and ``traces::status``. With ``tracing.exporters``
naming ``bus``, ``tackroom run``, ``tackroom serve`` and ``Harness`` boot it with the agent
workers (``tracing.store: null`` leaves it out). Several stores may read one stream: each keeps
every span (in its own file, or once in a shared one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import Field

from tackroom.contracts.traces import (
    GET,
    LIST,
    NOT_FOUND,
    STATUS,
    GetRequest,
    ListRequest,
    SessionTraces,
    StatusRequest,
    StoreStatus,
    TraceDetail,
    TraceList,
    TraceSummary,
)
from tackroom.engine.errors import FunctionError
from tackroom.kit.forgetting import forget_deleted_sessions
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.traces.reader import SpanReader
from tackroom.workers.traces.store import Retention, TraceStore

__all__ = ["DEFAULT_PATH", "WORKER", "TracesConfig", "by_session"]

DEFAULT_PATH = Path(".tackroom") / "traces.db"
T = TypeVar("T")


class TracesConfig(WorkerConfig):
    path: Path = Field(
        default=DEFAULT_PATH, description="the SQLite file (relative: to the working directory)"
    )
    max_age_hours: float | None = Field(
        default=168.0, gt=0, description="hours a trace is kept after it ended; null: no limit"
    )
    max_spans: int | None = Field(
        default=200_000, ge=100, description="spans kept at most (oldest traces go first)"
    )

    def retention(self) -> Retention:
        max_age = None if self.max_age_hours is None else self.max_age_hours * 3600.0
        return Retention(max_age=max_age, max_spans=self.max_spans)


def by_session(traces: list[TraceSummary]) -> list[SessionTraces]:
    """``traces`` (newest first) grouped by session, the session of the newest trace first."""
    groups: dict[str | None, SessionTraces] = {}
    for trace in traces:
        group = groups.setdefault(
            trace.session_id, SessionTraces(session_id=trace.session_id, trace_ids=[])
        )
        group.trace_ids.append(trace.trace_id)
        if trace.run_id is not None and trace.run_id not in group.run_ids:
            group.run_ids.append(trace.run_id)
    return list(groups.values())


async def _start(ctx: WorkerContext[TracesConfig]) -> None:
    config = ctx.config
    reader = SpanReader(ctx.engine, path=config.path.expanduser(), retention=config.retention())
    ctx.spawn(reader.run(), name="traces: read traces::spans")

    async def on_store(work: Callable[[TraceStore], T]) -> T:
        store = await reader.store()
        try:
            return await asyncio.to_thread(work, store)
        except Exception as exc:  # the file went away, the disk failed: one line
            raise FunctionError("unavailable", f"the trace store failed: {exc}") from None

    async def list_traces(request: ListRequest) -> TraceList:
        traces = await on_store(
            lambda store: store.list(
                session_id=request.session_id, run_id=request.run_id, limit=request.limit
            )
        )
        return TraceList(traces=traces, sessions=by_session(traces))

    async def get_trace(request: GetRequest) -> TraceDetail:
        found = await on_store(lambda store: store.get(request.trace_id))
        if found is None:
            raise FunctionError(
                NOT_FOUND,
                f"no trace {request.trace_id} in the store (never stored, or past retention)",
            )
        return found

    async def status(request: StatusRequest) -> StoreStatus:
        return await on_store(lambda store: store.status())

    await ctx.serve(LIST, list_traces)
    await ctx.serve(GET, get_trace)
    await ctx.serve(STATUS, status)

    async def forget(session_id: str) -> dict[str, int]:
        return {"spans": await on_store(lambda store: store.forget_session(session_id))}

    await forget_deleted_sessions(ctx, forget)


WORKER: WorkerSpec[TracesConfig] = WorkerSpec(
    name="traces",
    description="A trace store: spans of every worker in SQLite, by trace, run or session.",
    config_model=TracesConfig,
    start=_start,
)
