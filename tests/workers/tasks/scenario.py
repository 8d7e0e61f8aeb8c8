"""The graph of the issue's "done when", its test functions, and a harness that runs it.

Six steps: ``items`` lists 10 things, ``fan`` fans out over them (4 at once), ``flaky`` fails
twice then succeeds, ``slow`` times out on its first attempt, ``approve`` waits for a person,
``report`` (when ``flaky`` said ok) sums it up. Every function with a side effect records it
under the step's idempotency key, create-only, and counts its calls, so a test can tell "ran
once" from "ran again after a crash but had no second effect".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from tackroom.contracts import approvals as ap
from tackroom.contracts import tasks as c
from tackroom.engine import Engine, RevisionConflict
from tackroom.engine.errors import FunctionError
from tackroom.kit.taskgraph import parse_graph
from tackroom.runtime import Host, load_worker
from tackroom.runtime.config import SCHEMA_VERSION, HarnessConfig
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

EFFECTS = "fx-effects"
CALLS = "fx-calls"
RUN_ID = "scenario-1"

GRAPH: dict[str, Any] = {
    "name": "scenario",
    "inputs": {"n": 10},
    "steps": [
        {"id": "items", "call": "fx::list", "input": {"n": "${inputs.n}"}},
        {
            "id": "fan",
            "for_each": "${steps.items.output}",
            "concurrency": 4,
            "call": "fx::effect",
            "input": {"key": "${task.idempotency_key}", "value": "${item.i}"},
        },
        {
            "id": "flaky",
            "depends_on": ["items"],
            "call": "fx::flaky",
            "input": {"key": "${task.idempotency_key}", "attempt": "${task.attempt}"},
            "retry": {"attempts": 3, "on_errors": ["flaky"]},
        },
        {
            "id": "slow",
            "call": "fx::slow",
            "timeout": 0.5,
            "input": {"key": "${task.idempotency_key}", "attempt": "${task.attempt}"},
            "retry": {"attempts": 2, "on_errors": ["timeout"]},
        },
        {
            "id": "approve",
            "depends_on": ["fan", "slow"],
            "requires_approval": True,
            "call": "fx::effect",
            "input": {"key": "${task.idempotency_key}", "value": 100},
        },
        {
            "id": "report",
            "when": "${steps.flaky.output.ok} == true",
            "call": "fx::effect",
            "input": {
                "key": "${task.idempotency_key}",
                "value": "fan ${steps.fan.output} approve ${steps.approve.output.value}",
            },
        },
    ],
    "outputs": {
        "fan": "${steps.fan.output}",
        "report": "${steps.report.output.value}",
        "slow": "${steps.slow.output}",
    },
}

EXPECTED_OUTPUTS = {
    "fan": [{"value": i} for i in range(10)],
    "report": "fan " + str([{"value": i} for i in range(10)]).replace("'", '"') + " approve 100",
    "slow": {"value": "slow"},
}
EXPECTED_EFFECTS = sorted(
    [f"{RUN_ID}/fan.{i}/0" for i in range(10)]
    + [f"{RUN_ID}/{s}/0" for s in ("flaky", "slow", "approve", "report")]
)


class _Effect(BaseModel):
    key: str
    value: Any = None


async def _effect(engine: Engine, key: str, value: Any) -> dict[str, Any]:
    """Do the side effect of ``key`` once: a repeat returns the first result."""
    await engine.update_state(CALLS, key, [{"op": "increment", "path": ["n"], "value": 1}])
    result = {"value": value}
    try:
        await engine.set_state(EFFECTS, key, result, expected_revision=0)
    except RevisionConflict:
        stored = await engine.get_state(EFFECTS, key)
        assert stored is not None
        return dict(stored.value)
    return result


async def _start(ctx: WorkerContext[Any]) -> None:
    engine = ctx.engine

    async def listing(payload: Any) -> list[dict[str, int]]:
        return [{"i": i} for i in range(int(payload["n"]))]

    async def effect(payload: Any) -> dict[str, Any]:
        request = _Effect.model_validate(payload)
        return await _effect(engine, request.key, request.value)

    async def flaky(payload: Any) -> dict[str, Any]:
        if int(payload["attempt"]) <= 2:
            raise FunctionError("flaky", f"attempt {payload['attempt']} fails")
        await _effect(engine, payload["key"], "flaky")
        return {"ok": True}

    async def slow(payload: Any) -> dict[str, Any]:
        if int(payload["attempt"]) == 1:
            await asyncio.sleep(30)
        return await _effect(engine, payload["key"], "slow")

    await ctx.register_function("fx::list", listing)
    await ctx.register_function("fx::effect", effect)
    await ctx.register_function("fx::flaky", flaky)
    await ctx.register_function("fx::slow", slow)


FX_WORKER: WorkerSpec[Any] = WorkerSpec(
    name="fx", description="test side effects", config_model=WorkerConfig, start=_start
)


def host_for(engine: Engine, **tasks: Any) -> Host:
    config = HarnessConfig(
        schema_version=SCHEMA_VERSION,
        worker_config={"tasks": tasks or None, "approvals": {"default_mode": "manual"}},
    )
    workers = [load_worker(n) for n in ("engine", "approvals")] + [FX_WORKER, load_worker("tasks")]
    return Host(engine=engine, workers=workers, config=config)


async def approver(engine: Engine) -> None:
    """Allow every task step waiting for approval, as a person would (until cancelled)."""
    while True:
        pending = await ap.LIST_PENDING.call(engine, ap.ListPendingRequest())
        for item in pending.pending:
            with contextlib.suppress(Exception):
                await ap.RESOLVE.call(
                    engine,
                    ap.ResolveRequest(
                        session_id=item.session_id,
                        function_call_id=item.function_call_id,
                        decision="allow",
                        approver="test",
                    ),
                )
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def approving(engine: Engine) -> AsyncIterator[None]:
    task = asyncio.create_task(approver(engine))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def start(engine: Engine, *, run_id: str = RUN_ID) -> c.TaskRunResponse:
    return await c.RUN.call(
        engine, c.TaskRunRequest(graph=parse_graph(GRAPH), run_id=run_id, source="scenario")
    )


async def finished(engine: Engine, run_id: str = RUN_ID, *, timeout: float = 20) -> c.TaskRun:
    async with asyncio.timeout(timeout):
        while True:
            run = await c.RUNS_SCOPE.get(engine, run_id)
            if run is not None and run.terminal:
                return run
            await asyncio.sleep(0.02)


async def effects(engine: Engine) -> list[str]:
    return sorted(entry.key for entry in await engine.list_state(EFFECTS))
