"""The ``tasks`` worker: declarative task graphs run on the engine's durable queue.

```yaml
worker_config:
  tasks:
    call_timeout: 60          # seconds per attempt of a call step without its own timeout
    agent_timeout: 1800       # … of an agent step
    schedules:                # graphs cron starts (each fire is one run, once)
      - cron: "0 6 * * *"
        graph: nightly.yaml   # relative: to the working directory
        inputs: {day: today}
```

Every change to a run is a compare-and-set commit of its record (:mod:`.planner` decides, this
module reads, commits and enqueues), and the instances a commit queued are enqueued after it
with a dedupe key of their own: a crash between the two is repaired at boot (every running
run's queued instances are enqueued again; the dedupe key makes a repeat a no-op), a stale or
repeated delivery finds its instance already past that attempt and does nothing. See
``docs/workers/tasks.md``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tackroom.contracts import tasks as c
from tackroom.contracts.approvals import DECISIONS_SCOPE
from tackroom.engine.protocol import QueueConfig
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.tasks.config import Schedule, TasksConfig

if TYPE_CHECKING:
    from tackroom.workers.tasks.service import Tasks

__all__ = ["WORKER", "Schedule", "TasksConfig"]

T = TypeVar("T")
R = TypeVar("R")


class _Lazy:
    """The service, imported and built at its first use: a harness that runs no graph pays
    for registering a few functions, nothing more."""

    def __init__(self, ctx: WorkerContext[TasksConfig]) -> None:
        self._ctx = ctx
        self._tasks: Tasks | None = None

    def get(self) -> Tasks:
        if self._tasks is None:
            from tackroom.workers.tasks.service import Tasks

            self._tasks = Tasks(self._ctx)
        return self._tasks

    def bind(self, name: str) -> Callable[[Any], Awaitable[Any]]:
        async def handler(request: Any) -> Any:
            return await getattr(self.get(), name)(request)

        return handler


async def _start(ctx: WorkerContext[TasksConfig]) -> None:
    tasks = _Lazy(ctx)
    schedules: list[tuple[Schedule, Callable[[Any], Any]]] = []
    for schedule in ctx.config.schedules:
        from tackroom.kit.taskgraph import GraphError

        try:
            schedules.append((schedule, tasks.get().scheduled(schedule)))
        except GraphError as exc:
            raise ValueError(f"worker_config.tasks.schedules: {exc}") from None
    await ctx.engine.configure_queue(
        c.STEP_QUEUE,
        QueueConfig(
            max_deliveries=ctx.config.max_deliveries,
            visibility_timeout=ctx.config.visibility_timeout,
            backoff_initial=0.2,
            backoff_max=10.0,
            concurrency=ctx.config.concurrency,
        ),
    )
    await ctx.serve(c.RUN, tasks.bind("run"))
    await ctx.serve(c.STATUS, tasks.bind("status"))
    await ctx.serve(c.LIST, tasks.bind("list"))
    await ctx.serve(c.CANCEL, tasks.bind("cancel"))
    await ctx.serve(c.PAUSE, tasks.bind("pause"))
    await ctx.serve(c.RESUME, tasks.bind("resume"))
    await ctx.serve(c.RERUN, tasks.bind("rerun"))
    await ctx.register_function(
        c.ON_APPROVAL,
        tasks.bind("on_approval"),
        description="Wake a task step parked for approval.",
    )
    await ctx.add_state_trigger(DECISIONS_SCOPE.name, c.ON_APPROVAL)
    for index, (schedule, fire) in enumerate(schedules):
        function_id = c.cron_function(index)
        await ctx.register_function(function_id, fire, description=f"Run {schedule.graph}.")
        await ctx.add_cron_trigger(schedule.cron, function_id)

    async def serve_steps() -> None:
        # Deliveries start once the whole boot list is up: a step's function must be served.
        await ctx.register_function(c.STEP, tasks.bind("step"), description="Run one task step.")
        if await ctx.engine.list_state(c.RUNS_SCOPE.name):
            await tasks.get().recover()

    if ctx.config.execute:
        ctx.after_start(serve_steps)


WORKER: WorkerSpec[TasksConfig] = WorkerSpec(
    name="tasks",
    description="Declarative task graphs (tasks::*): steps on the durable queue, CAS commits.",
    config_model=TasksConfig,
    start=_start,
)
