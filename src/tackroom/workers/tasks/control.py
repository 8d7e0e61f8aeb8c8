"""Pure changes to a run record: a step's outcome, cancel, pause, resume and re-run."""

from __future__ import annotations

import time
from collections.abc import Callable

from tackroom.contracts.tasks import (
    ListResponse,
    RunStatus,
    RunSummary,
    StepDelivery,
    TaskRun,
)
from tackroom.workers.tasks.planner import GraphPlan, Outcome, advance, apply_outcome, rerun

__all__ = [
    "cancelling",
    "current",
    "pausing",
    "recording",
    "rerunning",
    "resuming",
    "summaries",
    "together",
]

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


def current(run: TaskRun, delivery: StepDelivery, *, outcome: bool = False) -> bool:
    """Whether ``delivery`` is still its instance's attempt, of a running run — or, for an
    ``outcome`` to record, of a paused one too: a step under way when the run was paused
    finishes and commits (the planner starts nothing new while the run is paused)."""
    instance = run.instances.get(delivery.instance)
    statuses = ("running", "paused") if outcome else ("running",)
    if run.status not in statuses or instance is None or instance.attempt != delivery.attempt:
        return False
    return instance.status in _WAKES[delivery.wake]


_WAKES: dict[str, frozenset[str]] = {
    "run": frozenset({"queued", "awaiting_approval", "in_child"}),
    "approval": frozenset({"awaiting_approval"}),
    "child": frozenset({"in_child"}),
}


def together(changes: list[Change]) -> Change:
    """Several changes as one: what each queues, or ``None`` when none changed anything."""

    def change(run: TaskRun, plan: GraphPlan) -> list[str] | None:
        queued: list[str] | None = None
        for one in changes:
            more = one(run, plan)
            if more is not None:
                queued = [*(queued or []), *more]
        return None if queued is None else list(dict.fromkeys(queued))

    return change


def recording(delivery: StepDelivery, outcome: Outcome) -> Change:
    def record(run: TaskRun, plan: GraphPlan) -> list[str] | None:
        if not current(run, delivery, outcome=True):
            return None
        return apply_outcome(run, plan, delivery.instance, outcome, now=time.time())

    return record
