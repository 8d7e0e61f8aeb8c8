"""Cancel, pause, resume, re-run and a run's inputs — pure changes to a run record."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tackroom.contracts.tasks import (
    GraphSpec,
    ListResponse,
    RunStatus,
    RunSummary,
    TaskRun,
)
from tackroom.kit.taskgraph import GraphError
from tackroom.workers.tasks.planner import GraphPlan, advance, rerun

__all__ = ["cancelling", "merged_inputs", "pausing", "rerunning", "resuming", "summaries"]

Change = Callable[[TaskRun, GraphPlan], list[str] | None]


def merged_inputs(graph: GraphSpec, given: dict[str, Any]) -> dict[str, Any]:
    """The graph's declared defaults overlaid with ``given``; a required one missing or an
    undeclared one given is a :class:`GraphError` (the caller maps it to ``invalid_inputs``)."""
    unknown = sorted(set(given) - set(graph.inputs))
    if unknown:
        declared = ", ".join(sorted(graph.inputs)) or "none"
        raise InputsError(f"unknown input(s) {', '.join(unknown)} (declared: {declared})")
    merged = {**graph.inputs, **given}
    missing = sorted(name for name, value in merged.items() if value is None)
    if missing:
        raise InputsError(f"missing required input(s): {', '.join(missing)} (give --input k=v)")
    return merged


class InputsError(GraphError):
    """Inputs that do not fit the graph's ``inputs:``."""


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
