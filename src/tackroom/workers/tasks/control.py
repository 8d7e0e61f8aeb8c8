"""Cancel, pause, resume and re-run — pure changes to a run record."""

from __future__ import annotations

import time
from collections.abc import Callable

from tackroom.contracts.tasks import (
    ListResponse,
    RunStatus,
    RunSummary,
    TaskRun,
)
from tackroom.workers.tasks.planner import GraphPlan, advance, rerun

__all__ = ["cancelling", "pausing", "rerunning", "resuming", "summaries"]

Change = Callable[[TaskRun, GraphPlan], list[str] | None]


def cancelling(reason: str | None) -> Change:
    def change(run: TaskRun, plan: GraphPlan) -> list[str] | None:
        if run.terminal:
            return None
        run.status, run.finished_at = "cancelled", time.time()
        run.error = reason or "cancelled"
        return []

    return change


def pausing(run: TaskRun, plan: GraphPlan) -> list[str] | None:
    if run.status != "running":
        return None
    run.status = "paused"
    return []


def resuming(run: TaskRun, plan: GraphPlan) -> list[str] | None:
    """Running again; the caller re-enqueues what was queued (with a new wake count, so the
    dedupe window does not swallow it)."""
    if run.status != "paused":
        return None
    run.status = "running"
    run.wake += 1
    advance(run, plan, now=time.time())
    return []


def rerunning(step_id: str) -> Change:
    def change(run: TaskRun, plan: GraphPlan) -> list[str] | None:
        return rerun(run, plan, step_id, now=time.time())

    return change


def summaries(runs: list[tuple[str, TaskRun]], status: RunStatus | None) -> ListResponse:
    chosen = [run for _, run in runs if status is None or run.status == status]
    chosen.sort(key=lambda run: run.created_at)
    return ListResponse(
        runs=[
            RunSummary(
                run_id=run.run_id,
                graph_name=run.graph_name,
                status=run.status,
                created_at=run.created_at,
                finished_at=run.finished_at,
            )
            for run in chosen
        ]
    )
