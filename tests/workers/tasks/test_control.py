"""Steering runs: pause and resume, cancel, re-run from a step, sub-graphs, cron; a bad graph
starts nothing. On the embedded engine (the scenario and the crash loop cover NATS)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts import approvals as ap
from tackroom.contracts import tasks as c
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.kit.taskgraph import parse_graph
from tackroom.testing.waiting import wait_until

from .scenario import effects, finished, host_for

GATED: dict[str, Any] = {
    "name": "gated",
    "steps": [
        {
            "id": "a",
            "call": "fx::effect",
            "requires_approval": True,
            "input": {"key": "${task.idempotency_key}", "value": 1},
        },
        {
            "id": "b",
            "call": "fx::effect",
            "depends_on": ["a"],
            "input": {"key": "${task.idempotency_key}", "value": 2},
        },
    ],
}


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    async with host_for(open_engine(f"embedded:{tmp_path / 'e.db'}")) as host:
        yield host.engine


async def _start(engine: Engine, graph: dict[str, Any], run_id: str) -> None:
    await c.RUN.call(engine, c.TaskRunRequest(graph=parse_graph(graph), run_id=run_id))


async def _status(engine: Engine, run_id: str) -> c.TaskRun:
    run = await c.STATUS.call(engine, c.StatusRequest(run_id=run_id))
    assert run is not None
    return run


async def _awaiting(engine: Engine, run_id: str, instance: str) -> None:
    async def parked() -> bool:
        run = await _status(engine, run_id)
        return run.instances.get(instance, c.Instance()).status == "awaiting_approval"

    await wait_until(parked)


async def _allow(engine: Engine, run_id: str, call: str) -> None:
    await ap.RESOLVE.call(
        engine,
        ap.ResolveRequest(
            session_id=c.approval_session(run_id), function_call_id=call, decision="allow"
        ),
    )


async def test_pause_holds_new_steps_and_resume_goes_on(engine: Engine) -> None:
    await _start(engine, GATED, "p1")
    await _awaiting(engine, "p1", "a")
    paused = await c.PAUSE.call(engine, c.ControlRequest(run_id="p1"))
    assert (paused.status, paused.changed) == ("paused", True)
    await _allow(engine, "p1", "a")
    await asyncio.sleep(0.3)  # the wake-up is delivered and ignored: the run is paused
    run = await _status(engine, "p1")
    assert (run.status, run.instances["a"].status) == ("paused", "awaiting_approval")
    assert await effects(engine) == []
    resumed = await c.RESUME.call(engine, c.ControlRequest(run_id="p1"))
    assert resumed.status == "running"
    run = await finished(engine, "p1")
    assert run.status == "succeeded"
    assert await effects(engine) == ["p1/a/0", "p1/b/0"]


async def test_a_cancelled_run_starts_nothing_more(engine: Engine) -> None:
    await _start(engine, GATED, "c1")
    await _awaiting(engine, "c1", "a")
    reply = await c.CANCEL.call(engine, c.ControlRequest(run_id="c1", reason="not today"))
    assert (reply.status, reply.changed) == ("cancelled", True)
    await _allow(engine, "c1", "a")
    await asyncio.sleep(0.3)
    run = await _status(engine, "c1")
    assert (run.status, run.error) == ("cancelled", "not today")
    assert await effects(engine) == []
    again = await c.CANCEL.call(engine, c.ControlRequest(run_id="c1"))
    assert not again.changed


async def test_a_denied_approval_fails_the_step_without_retry(engine: Engine) -> None:
    graph = {**GATED, "steps": [{**GATED["steps"][0], "retry": {"attempts": 3}}]}
    await _start(engine, graph, "d1")
    await _awaiting(engine, "d1", "a")
    await ap.RESOLVE.call(
        engine,
        ap.ResolveRequest(
            session_id=c.approval_session("d1"),
            function_call_id="a",
            decision="deny",
            reason="too risky",
        ),
    )
    run = await finished(engine, "d1")
    assert run.status == "failed"
    assert run.instances["a"].attempt == 1
    assert "too risky" in (run.error or "")


async def test_rerun_from_a_step_runs_it_and_what_follows_again(engine: Engine) -> None:
    graph = {
        "steps": [
            {"id": "a", "call": "fx::effect", "input": {"key": "${task.idempotency_key}"}},
            {
                "id": "b",
                "call": "fx::effect",
                "depends_on": ["a"],
                "input": {"key": "${task.idempotency_key}"},
            },
            {"id": "c", "call": "fx::effect", "input": {"key": "${task.idempotency_key}"}},
        ]
    }
    await _start(engine, graph, "r1")
    assert (await finished(engine, "r1")).status == "succeeded"
    reply = await c.RERUN.call(engine, c.RerunRequest(run_id="r1", step="a"))
    assert reply.changed
    run = await finished(engine, "r1")
    assert (run.status, run.epoch) == ("succeeded", 1)
    assert await effects(engine) == ["r1/a/0", "r1/a/1", "r1/b/0", "r1/b/1", "r1/c/0"]
    with pytest.raises(InvocationError) as caught:
        await c.RERUN.call(engine, c.RerunRequest(run_id="r1", step="zz"))
    assert caught.value.remote_code == c.NOT_FOUND_ERROR


async def test_a_sub_graph_runs_as_a_child_run_and_gives_its_outputs(engine: Engine) -> None:
    child = {
        "inputs": {"v": None},
        "steps": [
            {
                "id": "s",
                "call": "fx::effect",
                "input": {"key": "${task.idempotency_key}", "value": "${inputs.v}"},
            }
        ],
        "outputs": {"got": "${steps.s.output.value}"},
    }
    graph = {
        "steps": [{"id": "sub", "graph": child, "input": {"v": 42}}],
        "outputs": {"o": "${steps.sub.output.got}"},
    }
    await _start(engine, graph, "s1")
    run = await finished(engine, "s1")
    assert (run.status, run.outputs) == ("succeeded", {"o": 42})
    child_run = await _status(engine, run.instances["sub"].child_run or "")
    assert child_run.parent is not None
    assert child_run.parent.run_id == "s1"


async def test_a_bad_graph_or_bad_inputs_start_nothing(engine: Engine) -> None:
    bad = c.GraphSpec.model_validate(
        {
            "steps": [
                {"id": "a", "call": "f", "depends_on": ["b"]},
                {"id": "b", "call": "f", "depends_on": ["a"]},
            ]
        }
    )
    with pytest.raises(InvocationError) as caught:
        await c.RUN.call(engine, c.TaskRunRequest(graph=bad, run_id="bad"))
    assert caught.value.remote_code == c.GRAPH_ERROR
    assert "cycle" in str(caught.value)
    graph = parse_graph({"inputs": {"n": None}, "steps": [{"id": "a", "call": "f"}]})
    with pytest.raises(InvocationError) as caught:
        await c.RUN.call(engine, c.TaskRunRequest(graph=graph, run_id="bad2"))
    assert caught.value.remote_code == c.INPUTS_ERROR
    assert await engine.list_state(c.RUNS_SCOPE.name) == []
    assert await engine.list_state(c.GRAPHS_SCOPE.name) == []


async def test_cron_starts_a_scheduled_graph_once_per_fire(tmp_path: Path) -> None:
    graph = tmp_path / "nightly.yaml"
    graph.write_text(
        "name: nightly\ninputs: {v: 1}\n"
        "steps:\n  - {id: s, call: fx::effect, input: {key: '${task.idempotency_key}'}}\n"
    )
    schedules = [{"cron": "* * * * * *", "graph": str(graph), "inputs": {"v": 2}}]
    async with host_for(open_engine(f"embedded:{tmp_path / 'e.db'}"), schedules=schedules) as h:

        async def ran() -> list[c.TaskRun]:
            runs = [run for _, run in await c.RUNS_SCOPE.list(h.engine)]
            return [run for run in runs if run.status == "succeeded"]

        await wait_until(ran)
        run = (await ran())[0]
        assert run.run_id.startswith("nightly-cron-")
        assert run.inputs == {"v": 2}
        assert run.source == str(graph)
