"""The ``tasks`` worker's service: reading, committing and enqueueing runs (see ``worker.py``).

Every change to a run is a compare-and-set commit of its record (:mod:`.planner` decides, this
module reads, commits and enqueues), and the instances a commit queued are enqueued after it
with a dedupe key of their own: a crash between the two is repaired at boot (every running
run's queued instances are enqueued again; the dedupe key makes a repeat a no-op), a stale or
repeated delivery finds its instance already past that attempt and does nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from tackroom.contracts import tasks as c
from tackroom.contracts.approvals import DECISIONS_SCOPE
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.kit.taskgraph import GraphError, check_graph, load_graph
from tackroom.kit.taskgraph.inputs import InputsError, merged_inputs
from tackroom.runtime.worker import WorkerContext
from tackroom.workers.tasks import control
from tackroom.workers.tasks.config import Schedule, TasksConfig
from tackroom.workers.tasks.planner import (
    GraphPlan,
    advance,
    step_of,
)
from tackroom.workers.tasks.runner import Runner

__all__ = ["Tasks"]

_COMMIT_TRIES = 200
Change = Callable[[c.TaskRun, GraphPlan], list[str] | None]


class Tasks:
    def __init__(self, ctx: WorkerContext[TasksConfig]) -> None:
        self.engine = ctx.engine
        self._plans: OrderedDict[str, GraphPlan] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, list[tuple[Change, asyncio.Future[None]]]] = {}
        self._revisions: dict[str, int] = {}
        self._latest: OrderedDict[str, tuple[c.TaskRun, int]] = OrderedDict()
        self.runner = Runner(
            ctx.engine,
            call_timeout=ctx.config.call_timeout,
            agent_timeout=ctx.config.agent_timeout,
            start_child=self.start_child,
        )

    # -- reading and committing ------------------------------------------------------------

    async def plan(self, run_id: str) -> GraphPlan:
        plan = self._plans.get(run_id)
        if plan is None:
            graph = await c.GRAPHS_SCOPE.get(self.engine, run_id)
            if graph is None:
                raise FunctionError(c.NOT_FOUND_ERROR, f"no graph stored for run {run_id!r}")
            plan = self._plans[run_id] = GraphPlan(graph)
            while len(self._plans) > 256:
                self._plans.popitem(last=False)
        return plan

    async def read(self, run_id: str) -> tuple[c.TaskRun, int] | None:
        return await c.RUNS_SCOPE.get_entry(self.engine, run_id)

    async def write(self, run: c.TaskRun, *, expected_revision: int) -> None:
        """The record without its default values (an instance is mostly defaults; a run's
        record is written whole at every step, so its size is the step's cost)."""
        value = run.model_dump(mode="json", exclude_defaults=True)
        value["schema_version"] = c.SCHEMA_VERSION
        entry = await self.engine.set_state(
            c.RUNS_SCOPE.name, run.run_id, value, expected_revision=expected_revision
        )
        self._revisions[run.run_id] = entry.revision
        if len(self._revisions) > 4096:
            self._revisions.pop(next(iter(self._revisions)))

    async def commit(
        self, run_id: str, change: Change, *, first: tuple[c.TaskRun, int] | None = None
    ) -> tuple[c.TaskRun, bool] | None:
        """Apply ``change`` to the run and write it with compare-and-set (again on a conflict,
        from the new record); ``change`` returns the instances to queue, or ``None`` for
        nothing to write. Returns the run and whether it was written. ``first``: the record
        as the caller read it (a fresh copy), tried before reading again."""
        plan = await self.plan(run_id)
        async with self._lock(run_id):
            return await self._commit(run_id, plan, change, first)

    def _lock(self, run_id: str) -> asyncio.Lock:
        """One committer per run in this process: concurrent steps of one run would otherwise
        lose their compare-and-set to each other, each retry re-reading the whole record.
        Compare-and-set still guards against other processes (NATS)."""
        lock = self._locks.get(run_id)
        if lock is None:
            lock = self._locks[run_id] = asyncio.Lock()
            while len(self._locks) > 1024:
                oldest = next(iter(self._locks))
                if self._locks[oldest].locked():
                    break
                del self._locks[oldest]
        return lock

    async def _commit(
        self,
        run_id: str,
        plan: GraphPlan,
        change: Change,
        first: tuple[c.TaskRun, int] | None,
    ) -> tuple[c.TaskRun, bool] | None:
        first = self._freshest(run_id, first)
        for _ in range(_COMMIT_TRIES):
            entry, first = first or await self.read(run_id), None
            if entry is None:
                return None
            run, revision = entry
            was_terminal = run.terminal
            queued = change(run, plan)
            if queued is None:
                return run, False
            run.updated_at = time.time()
            try:
                await self.write(run, expected_revision=revision)
            except RevisionConflict:
                continue
            self._keep(run, revision=self._revisions[run_id])
            await self.enqueue(run, queued)
            if run.terminal and not was_terminal:
                await self._ended(run)
            return run, True
        raise FunctionError("contention", f"run {run_id}: too many concurrent commits")

    def _freshest(
        self, run_id: str, first: tuple[c.TaskRun, int] | None
    ) -> tuple[c.TaskRun, int] | None:
        """The newest copy of the record this process holds: the caller's read, or the record
        as this process last wrote it — taken out of the cache, since ``change`` edits it. A
        copy another process has overtaken only loses its compare-and-set and is read again;
        not reading and validating the whole record again after our own commit is what keeps a
        wide run's step from paying for the record twice."""
        kept = self._latest.pop(run_id, None)
        if kept is not None and (first is None or kept[1] >= first[1]):
            return kept
        if first is not None and first[1] < self._revisions.get(run_id, 0):
            return None  # this process has committed since it was read
        return first

    def _keep(self, run: c.TaskRun, *, revision: int) -> None:
        self._latest[run.run_id] = (run, revision)
        while len(self._latest) > 64:
            self._latest.popitem(last=False)

    async def enqueue(self, run: c.TaskRun, instance_ids: list[str], wake: c.Wake = "run") -> None:
        for instance_id in instance_ids:
            instance = run.instances[instance_id]
            delivery = c.StepDelivery(
                run_id=run.run_id, instance=instance_id, attempt=instance.attempt, wake=wake
            )
            key = f"{run.run_id}/{instance_id}/{instance.epoch}/{instance.attempt}/{run.wake}"
            key += "" if wake == "run" else f"/{wake}"
            await self.engine.enqueue(
                c.STEP, delivery.model_dump(mode="json"), queue=c.STEP_QUEUE, dedupe_key=key
            )

    async def _ended(self, run: c.TaskRun) -> None:
        if run.status == "cancelled":
            for instance in run.instances.values():
                if instance.status == "in_child" and instance.child_run:
                    await self.cancel(c.ControlRequest(run_id=instance.child_run))
        parent = run.parent
        if parent is not None:
            entry = await c.RUNS_SCOPE.get(self.engine, parent.run_id)
            if entry is not None and parent.instance in entry.instances:
                await self.enqueue(entry, [parent.instance], "child")

    async def kick(self, run: c.TaskRun) -> None:
        """Enqueue again whatever a running run waits on (harmless when already queued)."""
        if run.status != "running":
            return
        await self.enqueue(run, [i for i, inst in run.instances.items() if inst.status == "queued"])
        for instance_id, instance in run.instances.items():
            if instance.status == "awaiting_approval":
                key = f"{c.approval_session(run.run_id)}/"
                key += c.approval_call_id(instance_id, instance.epoch)
                if await self.engine.get_state(DECISIONS_SCOPE.name, key) is not None:
                    await self.enqueue(run, [instance_id], "approval")
            elif instance.status == "in_child" and instance.child_run:
                child = await c.RUNS_SCOPE.get(self.engine, instance.child_run)
                if child is not None and child.terminal:
                    await self.enqueue(run, [instance_id], "child")

    # -- starting runs -----------------------------------------------------------------------

    async def run(self, request: c.TaskRunRequest) -> c.TaskRunResponse:
        run_id = request.run_id or f"{_slug(request.graph.name)}-{time.time_ns() // 1000:x}"
        try:
            run, created = await self.create(
                request.graph,
                request.inputs,
                run_id=run_id,
                source=request.source,
                model=request.model,
                parent=None,
            )
        except InputsError as exc:
            raise FunctionError(c.INPUTS_ERROR, str(exc)) from None
        except GraphError as exc:
            raise FunctionError(c.GRAPH_ERROR, str(exc)) from None
        return c.TaskRunResponse(run_id=run.run_id, created=created, status=run.status)

    async def start_child(
        self,
        *,
        run: c.TaskRun,
        graph: c.GraphSpec,
        inputs: dict[str, Any],
        run_id: str,
        instance_id: str,
        attempt: int,
    ) -> c.TaskRun:
        parent = c.ParentRef(run_id=run.run_id, instance=instance_id, attempt=attempt)
        child, _ = await self.create(
            graph, inputs, run_id=run_id, source=run.source, model=run.model, parent=parent
        )
        return child

    async def create(
        self,
        graph: c.GraphSpec,
        inputs: dict[str, Any],
        *,
        run_id: str,
        source: str | None,
        model: str | None,
        parent: c.ParentRef | None,
    ) -> tuple[c.TaskRun, bool]:
        """The run ``run_id`` of ``graph``, created (and its first steps queued) unless it
        exists; a retried start changes nothing but re-enqueues what the run waits on."""
        check_graph(graph, source=source)
        merged = merged_inputs(graph, inputs)
        existing = await c.RUNS_SCOPE.get(self.engine, run_id)
        if existing is not None:
            await self.kick(existing)
            return existing, False
        try:
            await c.GRAPHS_SCOPE.set(self.engine, run_id, graph, expected_revision=0)
        except RevisionConflict:
            stored = await c.GRAPHS_SCOPE.get(self.engine, run_id)
            if stored != graph:
                raise FunctionError(
                    c.GRAPH_ERROR, f"run id {run_id!r} is taken by another graph"
                ) from None
        now = time.time()
        run = c.TaskRun(
            run_id=run_id,
            graph_name=graph.name,
            source=source,
            inputs=merged,
            model=model,
            parent=parent,
            created_at=now,
            updated_at=now,
        )
        self._plans.pop(run_id, None)
        queued = advance(run, await self.plan(run_id), now=now)
        try:
            await self.write(run, expected_revision=0)
        except RevisionConflict:
            latest = await c.RUNS_SCOPE.get(self.engine, run_id)
            assert latest is not None
            return latest, False
        await self.enqueue(run, queued)
        if run.terminal:
            await self._ended(run)
        return run, True

    # -- the step delivery -------------------------------------------------------------------

    async def step(self, payload: Any) -> None:
        delivery = c.StepDelivery.model_validate(payload)
        entry = await self.read(delivery.run_id)
        if entry is None or not control.current(entry[0], delivery):
            return
        run = entry[0]
        plan = await self.plan(run.run_id)
        step = plan.steps[step_of(delivery.instance)]
        outcome = await self.runner.attempt(run, plan, step, delivery.instance)
        if outcome is not None:
            await self.record(run.run_id, control.recording(delivery, outcome), first=entry)

    async def record(
        self, run_id: str, change: Change, *, first: tuple[c.TaskRun, int] | None
    ) -> None:
        """Commit a step's outcome, together with the outcomes other deliveries of the run
        are waiting to commit (one record write for all of them: a wide fan-out finishing
        writes the record a few times, not once per item)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(run_id, []).append((change, done))
        plan = await self.plan(run_id)
        async with self._lock(run_id):
            if not done.done():
                batch = self._waiting.pop(run_id, [])
                try:
                    await self._commit(
                        run_id, plan, control.together([ch for ch, _ in batch]), first
                    )
                except BaseException as exc:
                    for _, waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(exc)
                    raise
                for _, waiter in batch:
                    if not waiter.done():
                        waiter.set_result(None)
        await done

    async def on_approval(self, payload: Any) -> None:
        key = str(payload.get("key", "")) if isinstance(payload, dict) else ""
        session, _, call_id = key.partition("/")
        if not session.startswith("tasks.") or payload.get("new_value") is None:
            return
        run = await c.RUNS_SCOPE.get(self.engine, session.removeprefix("tasks."))
        instance_id = call_id.split("@", 1)[0]
        if run is None or run.status != "running" or instance_id not in run.instances:
            return
        if run.instances[instance_id].status == "awaiting_approval":
            await self.enqueue(run, [instance_id], "approval")

    async def recover(self) -> None:
        for _, run in await c.RUNS_SCOPE.list(self.engine):
            await self.kick(run)

    # -- control -----------------------------------------------------------------------------

    async def status(self, request: c.StatusRequest) -> c.TaskRun | None:
        return await c.RUNS_SCOPE.get(self.engine, request.run_id)

    async def list(self, request: c.ListRequest) -> c.ListResponse:
        return control.summaries(await c.RUNS_SCOPE.list(self.engine), request.status)

    async def cancel(self, request: c.ControlRequest) -> c.ControlResponse:
        return await self._control(request.run_id, control.cancelling(request.reason))

    async def pause(self, request: c.ControlRequest) -> c.ControlResponse:
        return await self._control(request.run_id, control.pausing)

    async def resume(self, request: c.ControlRequest) -> c.ControlResponse:
        reply = await self._control(request.run_id, control.resuming)
        run = await c.RUNS_SCOPE.get(self.engine, request.run_id)
        if reply.changed and run is not None:
            await self.kick(run)
        return reply

    async def rerun(self, request: c.RerunRequest) -> c.ControlResponse:
        plan = await self.plan(request.run_id)
        if request.step not in plan.steps:
            raise FunctionError(
                c.NOT_FOUND_ERROR, f"run {request.run_id!r} has no step {request.step!r}"
            )
        return await self._control(request.run_id, control.rerunning(request.step))

    async def _control(self, run_id: str, change: Change) -> c.ControlResponse:
        result = await self.commit(run_id, change)
        if result is None:
            raise FunctionError(c.NOT_FOUND_ERROR, f"no task run {run_id!r}")
        run, changed = result
        return c.ControlResponse(run_id=run_id, status=run.status, changed=changed)

    # -- cron --------------------------------------------------------------------------------

    def scheduled(self, schedule: Schedule) -> Callable[[Any], Any]:
        graph = load_graph(schedule.graph)

        async def fire(payload: Any) -> None:
            fired = str(payload.get("fired_at", "")) if isinstance(payload, dict) else ""
            stamp = "".join(ch for ch in fired if ch.isalnum()) or f"{time.time_ns():x}"
            await self.create(
                graph,
                dict(schedule.inputs),
                run_id=f"{_slug(graph.name)}-cron-{stamp}",
                source=str(schedule.graph),
                model=None,
                parent=None,
            )

        return fire


def _slug(name: str) -> str:
    slug = "".join(ch if ch.isalnum() or ch in "_-" else "-" for ch in name).strip("-")
    return (slug or "graph")[:60]
