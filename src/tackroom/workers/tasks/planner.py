"""Where a run goes next — pure: a run record and an outcome in, the new record and the step
instances to queue out. No I/O, no clock (``now`` is given), so every rule is tested without an
engine, and a commit that lost its compare-and-set recomputes the same answer from the new
record."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tackroom.contracts.tasks import (
    ACTIVE_INSTANCE,
    TERMINAL_STEP,
    GraphSpec,
    Instance,
    StepRecord,
    StepSpec,
    TaskRun,
)
from tackroom.kit.taskgraph import dependencies, order
from tackroom.kit.taskgraph.refs import Condition, RefError, render

__all__ = ["ACTIVE", "GraphPlan", "Outcome", "advance", "apply_outcome", "rerun", "template_scope"]

ACTIVE = ACTIVE_INSTANCE


class GraphPlan:
    """What a graph implies, computed once per graph: order, dependencies, conditions."""

    def __init__(self, graph: GraphSpec) -> None:
        self.graph = graph
        self.order = order(graph)
        self.steps: dict[str, StepSpec] = {step.id: step for step in graph.steps}
        self.deps = {step.id: dependencies(step) for step in graph.steps}
        self.conditions = {
            step.id: Condition.parse(step.when) for step in graph.steps if step.when is not None
        }

    def dependents(self, step_id: str) -> list[str]:
        """``step_id`` and every step that needs it, directly or not, in order."""
        found = {step_id}
        for sid in self.order:
            if any(dep in found for dep in self.deps[sid]):
                found.add(sid)
        return [sid for sid in self.order if sid in found]


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: Literal["success", "failure", "park"]
    output: Any = None
    error_class: str = ""
    message: str = ""
    retryable: bool = True
    park_status: Literal["awaiting_approval", "in_child"] = "awaiting_approval"
    child_run: str | None = None


def instance_ids(step_id: str, record: StepRecord) -> list[str]:
    return [step_id] if record.count is None else [f"{step_id}.{i}" for i in range(record.count)]


def step_of(instance_id: str) -> str:
    return instance_id.split(".", 1)[0]


def step_output(run: TaskRun, step_id: str) -> Any:
    record = run.steps.get(step_id)
    if record is None or record.status != "succeeded":
        return None
    if record.count is None:
        return run.instances[step_id].output
    return [run.instances[iid].output for iid in instance_ids(step_id, record)]


class _Steps(Mapping[str, Any]):
    """``steps.ID.output`` of a run, computed only for the steps a template names."""

    def __init__(self, run: TaskRun) -> None:
        self._run = run

    def __getitem__(self, step_id: str) -> Any:
        record = self._run.steps.get(step_id)
        if record is None or record.status not in ("succeeded", "skipped"):
            raise KeyError(step_id)
        return {"output": step_output(self._run, step_id)}

    def __iter__(self) -> Iterator[str]:
        return iter(self._run.steps)

    def __len__(self) -> int:
        return len(self._run.steps)


def template_scope(run: TaskRun, instance_id: str | None = None) -> dict[str, Any]:
    scope: dict[str, Any] = {"inputs": run.inputs, "steps": _Steps(run)}
    if instance_id is not None:
        instance = run.instances[instance_id]
        scope["task"] = {
            "run_id": run.run_id,
            "instance": instance_id,
            "attempt": instance.attempt,
            "idempotency_key": f"{run.run_id}/{instance_id}/{instance.epoch}",
        }
        head, _, index = instance_id.partition(".")
        if index:
            scope["index"] = int(index)
            scope["item"] = (run.steps[head].items or [])[int(index)]
    return scope


def advance(run: TaskRun, plan: GraphPlan, *, now: float) -> list[str]:
    """Decide every step whose dependencies are decided, queue what the limits allow, conclude
    the run when nothing is left; returns the instances newly queued (``run`` is changed)."""
    if run.status != "running":
        return []
    for step_id in plan.order:
        record = run.steps.get(step_id)
        if record is None:
            record = run.steps[step_id] = StepRecord()
        if record.status == "waiting":
            _decide(run, plan, step_id, record)
    queued = _fill(run, plan, now=now)
    _conclude(run, plan, now=now)
    return queued


def _decide(run: TaskRun, plan: GraphPlan, step_id: str, record: StepRecord) -> None:
    states = [run.steps[dep].status for dep in plan.deps[step_id]]
    if "failed" in states or any(s in ("waiting", "active") for s in states):
        return
    if "skipped" in states:
        record.status, record.reason = "skipped", "a step it depends on was skipped"
        return
    step = plan.steps[step_id]
    scope = template_scope(run)
    try:
        condition = plan.conditions.get(step_id)
        if condition is not None and not condition.evaluate(scope):
            record.status, record.reason = "skipped", f"when is false: {step.when}"
            return
        items = None if step.for_each is None else render(step.for_each, scope)
    except RefError as exc:
        record.status, record.reason = "failed", str(exc)
        return
    if items is not None and not isinstance(items, list):
        record.status = "failed"
        record.reason = f"for_each is a {type(items).__name__}, not a list"
        return
    record.status = "active"
    if items is None:
        run.instances[step_id] = Instance(epoch=run.epoch)
        return
    record.count, record.items = len(items), items
    for index in range(len(items)):
        run.instances[f"{step_id}.{index}"] = Instance(epoch=run.epoch)
    if not items:
        record.status = "succeeded"


def _fill(run: TaskRun, plan: GraphPlan, *, now: float) -> list[str]:
    active = sum(1 for i in run.instances.values() if i.status in ACTIVE)
    queued: list[str] = []
    for step_id in plan.order:
        record = run.steps[step_id]
        if record.status != "active":
            continue
        ids = instance_ids(step_id, record)
        limit = plan.steps[step_id].concurrency if record.count is not None else 1
        running = sum(1 for iid in ids if run.instances[iid].status in ACTIVE)
        for iid in ids:
            if active >= plan.graph.concurrency:
                return queued
            instance = run.instances[iid]
            if instance.status != "pending" or running >= limit:
                continue
            instance.status, instance.attempt, instance.started_at = "queued", 1, now
            instance.epoch = run.epoch
            active += 1
            running += 1
            queued.append(iid)
    return queued


def _conclude(run: TaskRun, plan: GraphPlan, *, now: float) -> None:
    failed = [sid for sid in plan.order if run.steps[sid].status == "failed"]
    if failed:
        if not any(i.status in ACTIVE for i in run.instances.values()):
            record = run.steps[failed[0]]
            run.status, run.finished_at = "failed", now
            run.error = f"step {failed[0]!r} failed: {record.reason}"
        return
    if all(run.steps[sid].status in TERMINAL_STEP for sid in plan.order):
        try:
            run.outputs = render(plan.graph.outputs, template_scope(run))
        except RefError as exc:
            run.status, run.finished_at, run.error = "failed", now, f"outputs: {exc}"
            return
        run.status, run.finished_at = "succeeded", now


def apply_outcome(
    run: TaskRun, plan: GraphPlan, instance_id: str, outcome: Outcome, *, now: float
) -> list[str]:
    """Record what an attempt of ``instance_id`` came to; returns the instances to queue."""
    instance = run.instances[instance_id]
    step_id = step_of(instance_id)
    step, record = plan.steps[step_id], run.steps[step_id]
    if outcome.kind == "park":
        instance.status, instance.child_run = outcome.park_status, outcome.child_run
        return []
    if outcome.kind == "success":
        instance.status, instance.output, instance.ended_at = "succeeded", outcome.output, now
        instance.error = instance.error_class = None
        if all(run.instances[i].status == "succeeded" for i in instance_ids(step_id, record)):
            record.status = "succeeded"
        return advance(run, plan, now=now)
    instance.error, instance.error_class = outcome.message, outcome.error_class
    retry = step.retry
    if (
        outcome.retryable
        and retry.retries(outcome.error_class)
        and (instance.attempt < retry.attempts)
    ):
        instance.attempt += 1
        instance.status, instance.child_run = "queued", None
        instance.not_before = now + retry.delay(instance.attempt)
        return [instance_id] if run.status == "running" else []
    instance.status, instance.ended_at = "failed", now
    record.status = "failed"
    record.reason = f"{instance_id} (attempt {instance.attempt}): {outcome.message}"
    return advance(run, plan, now=now)


def rerun(run: TaskRun, plan: GraphPlan, step_id: str, *, now: float) -> list[str]:
    """Forget ``step_id`` and everything after it, then go on from there (a new epoch: their
    side effects get new idempotency keys)."""
    for sid in plan.dependents(step_id):
        record = run.steps.pop(sid, None)
        if record is None:
            continue
        for iid in instance_ids(sid, record):
            run.instances.pop(iid, None)
    run.epoch += 1
    run.status, run.outputs, run.error, run.finished_at = "running", None, None, None
    return advance(run, plan, now=now)
