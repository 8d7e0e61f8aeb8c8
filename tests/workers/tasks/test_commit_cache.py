"""A commit starts from the record as this process last wrote it (no read, no validation of the
whole record), and a copy another process has overtaken loses its compare-and-set and is read
again: nothing the other process committed is lost."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tackroom.contracts import tasks as c
from tackroom.engine import Engine, open_engine
from tackroom.kit.taskgraph import parse_graph
from tackroom.runtime.worker import WorkerContext
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.workers.tasks import control
from tackroom.workers.tasks.config import TasksConfig
from tackroom.workers.tasks.planner import Outcome
from tackroom.workers.tasks.service import Tasks

GRAPH = parse_graph(
    {
        "name": "three",
        "steps": [{"id": sid, "call": "fx::none", "input": {}} for sid in ("a", "b", "c", "d")],
    }
)


def _tasks(engine: Engine) -> Tasks:
    ctx = SimpleNamespace(engine=engine, config=TasksConfig())
    return Tasks(cast(WorkerContext[TasksConfig], ctx))


def _success(instance: str) -> Any:
    delivery = c.StepDelivery(run_id="r", instance=instance, attempt=1)
    return control.recording(delivery, Outcome(kind="success", output={"step": instance}))


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_stale_kept_record_loses_its_compare_and_set(backend: str, tmp_path: Path) -> None:
    engine = open_engine(engine_url_for(backend, tmp_path))
    await engine.start()
    try:
        here, elsewhere = _tasks(engine), _tasks(engine)
        await here.create(GRAPH, {}, run_id="r", source=None, model=None, parent=None)
        await here.commit("r", _success("a"))
        reads = 0
        read = here.read

        async def counting(run_id: str) -> tuple[c.TaskRun, int] | None:
            nonlocal reads
            reads += 1
            return await read(run_id)

        here.read = counting  # type: ignore[method-assign]
        await elsewhere.commit("r", _success("b"))
        await here.commit("r", _success("c"))
        assert reads == 1  # its kept copy was overtaken: it lost the compare-and-set, read again
        await here.commit("r", _success("d"))
        assert reads == 1  # started from the record it wrote

        run = await c.RUNS_SCOPE.get(engine, "r")
        assert run is not None
        outputs = {iid: inst.output for iid, inst in run.instances.items()}
        assert outputs == {sid: {"step": sid} for sid in "abcd"}
        assert run.status == "succeeded"
    finally:
        await engine.close()
