"""Task graphs through the front door: ``harness.tasks.run("tasks.yaml", inputs={...})``.

A graph is a ``tasks.yaml`` path, a dict of the same shape, or a
:class:`~tackroom.contracts.tasks.GraphSpec`; it is checked here first (a file's problems name
its line), so a bad graph never reaches the bus. The ``tasks`` worker (in the default boot list)
runs it. Also here: the pictures ``tackroom tasks graph`` prints (Mermaid, a terminal tree).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from tackroom.contracts import tasks as c
from tackroom.engine.errors import InvocationError
from tackroom.kit.taskgraph import GraphError, dependencies, load_graph, order, parse_graph
from tackroom.kit.taskgraph.inputs import merged_inputs

__all__ = ["GraphError", "TaskGraphs", "graph_of", "mermaid", "tree"]

GraphLike = str | Path | c.GraphSpec | Mapping[str, Any]


def graph_of(graph: GraphLike) -> tuple[c.GraphSpec, str | None]:
    """The checked graph and where it came from (a file's path, else ``None``)."""
    if isinstance(graph, (str, Path)):
        return load_graph(graph), str(graph)
    return parse_graph(graph), None


class _Harness(Protocol):
    """What :class:`TaskGraphs` needs of a ``Harness``."""

    provider: str
    model: str

    async def start(self) -> None: ...

    @property
    def bus(self) -> Any: ...


class TaskGraphs:
    """``Harness.tasks``: start, follow and steer task graph runs on the harness's bus."""

    def __init__(self, harness: _Harness) -> None:
        self._harness = harness

    async def _bus(self) -> Any:
        await self._harness.start()
        return self._harness.bus

    async def start(
        self,
        graph: GraphLike,
        *,
        inputs: Mapping[str, Any] | None = None,
        run_id: str | None = None,
    ) -> c.TaskRunResponse:
        """Start a run (idempotent by ``run_id``) and return at once."""
        spec, source = graph_of(graph)
        merged_inputs(spec, dict(inputs or {}))
        request = c.TaskRunRequest(
            graph=spec,
            inputs=dict(inputs or {}),
            run_id=run_id,
            source=source,
            model=f"{self._harness.provider}:{self._harness.model}",
        )
        try:
            return await c.RUN.call(await self._bus(), request)
        except InvocationError as exc:
            if exc.remote_code in (c.GRAPH_ERROR, c.INPUTS_ERROR):
                raise GraphError(str(exc), file=source) from None
            raise

    async def run(
        self,
        graph: GraphLike,
        *,
        inputs: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        timeout: float | None = None,
    ) -> c.TaskRun:
        """Start a run and wait for its end (succeeded, failed or cancelled)."""
        started = await self.start(graph, inputs=inputs, run_id=run_id)
        return await self.wait(started.run_id, timeout=timeout)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> c.TaskRun:
        """The run once it has ended (polled: a run's record changes once per step)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.01
        while True:
            run = await self.status(run_id)
            if run is None:
                raise KeyError(f"no task run {run_id!r}")
            if run.terminal:
                return run
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"task run {run_id} still {run.status} after {timeout}s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.25)

    async def status(self, run_id: str) -> c.TaskRun | None:
        return await c.STATUS.call(await self._bus(), c.StatusRequest(run_id=run_id))

    async def list(self, *, status: c.RunStatus | None = None) -> list[c.RunSummary]:
        reply = await c.LIST.call(await self._bus(), c.ListRequest(status=status))
        return reply.runs

    async def cancel(self, run_id: str, *, reason: str | None = None) -> c.ControlResponse:
        return await c.CANCEL.call(
            await self._bus(), c.ControlRequest(run_id=run_id, reason=reason)
        )

    async def pause(self, run_id: str) -> c.ControlResponse:
        return await c.PAUSE.call(await self._bus(), c.ControlRequest(run_id=run_id))

    async def resume(self, run_id: str) -> c.ControlResponse:
        return await c.RESUME.call(await self._bus(), c.ControlRequest(run_id=run_id))

    async def rerun(self, run_id: str, step: str) -> c.ControlResponse:
        """Run ``step`` and every step after it again (new idempotency keys)."""
        return await c.RERUN.call(await self._bus(), c.RerunRequest(run_id=run_id, step=step))


def _label(step: c.StepSpec) -> str:
    what = step.call if step.call is not None else step.kind
    marks = [
        f"for_each, {step.concurrency} at once" if step.for_each is not None else "",
        "approval" if step.requires_approval else "",
        f"when {step.when}" if step.when else "",
        f"retry {step.retry.attempts}" if step.retry.attempts > 1 else "",
        f"timeout {step.timeout:g}s" if step.timeout else "",
    ]
    extra = ", ".join(m for m in marks if m)
    return f"{step.id}: {what}" + (f" ({extra})" if extra else "")


def mermaid(graph: c.GraphSpec) -> str:
    """A Mermaid flowchart of the graph (``tackroom tasks graph FILE --format mermaid``)."""
    lines = ["flowchart TD"]
    for step in graph.steps:
        text = _label(step).replace('"', "'")
        lines.append(f'    {step.id}["{text}"]')
    for step in graph.steps:
        for dep in dependencies(step):
            lines.append(f"    {dep} --> {step.id}")
    return "\n".join(lines)


def tree(graph: c.GraphSpec) -> str:
    """The graph in the terminal: steps in run order, each under what it waits for."""
    lines = [f"{graph.name}" + (f" — {graph.description}" if graph.description else "")]
    steps = {step.id: step for step in graph.steps}
    ids = order(graph)
    for index, step_id in enumerate(ids):
        step = steps[step_id]
        branch = "└─" if index == len(ids) - 1 else "├─"
        deps = dependencies(step)
        after = f"  ← {', '.join(deps)}" if deps else ""
        lines.append(f"{branch} {_label(step)}{after}")
        if step.graph is not None:
            pad = "   " if index == len(ids) - 1 else "│  "
            lines.extend(pad + line for line in tree(step.graph).splitlines())
    return "\n".join(lines)
