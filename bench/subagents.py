"""Subagent benchmark: what calling an agent as a subagent costs over running it directly.

    python bench/subagents.py [--samples N] [--quick]

One embedded harness (temp SQLite file, WAL), gate thin, a ``FunctionModel`` playing two agents:
``child`` answers at once (one model call, no tools); the lead calls ``agent::child`` once, then
answers. Each sample, interleaved:

- **direct**: ``Harness.run`` of the child agent's instructions as a run of its own — the wall
  time from the call to its result (``run::start``, one model call, ``agent_end``);
- **subagent**: a lead run, timed from its ``function_execution_start`` event for the
  ``agent::child`` call to that call's ``function_execution_end`` (both seen on the lead's event
  stream): the agents worker starting the child run, the child run itself, its outcome written,
  the lead woken and resumed with the result.

``overhead`` = subagent wait - direct time of the same sample: the parking, the child's start
through the agents worker, the outcome and the wake. Target: p50 ≤ 2 ms on embedded. Timing is
wall clock on a shared machine (``machine.loadavg_1m`` says how shared).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine, p50_p99

from tackroom import Harness
from tackroom.contracts.agents import AgentDefinition
from tackroom.contracts.events import FunctionExecutionEnd, FunctionExecutionStart
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage
from tackroom.harness.models import ModelChunk, ToolCall
from tackroom.runtime import HarnessConfig
from tackroom.testing import FunctionModel, ModelInfo

SCHEMA_VERSION = 1
TARGET_P50_MS = 2.0
CHILD = "[agent:child]"


def respond(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
    if CHILD in info.system_prompt:
        return "child done"
    if any(isinstance(m, FunctionResultMessage) for m in messages):
        return "lead done"
    return [ToolCall("agent__child", {"task": "do it"}, id="call-child")]


def build(workdir: Path) -> Harness:
    config = HarnessConfig(
        schema_version=1,
        engine=f"embedded:{workdir / 'engine.db'}",
        workers=["engine"],
        worker_config={
            "orchestrator": {
                "cwd": str(workdir),
                "policy_function": None,
                "approvals_function": None,
            },
            "files": {"workspace_root": str(workdir / "workspaces")},
        },
    )
    return Harness(
        FunctionModel(respond),
        config=config,
        tools=[],
        agents=[AgentDefinition(name="child", instructions=CHILD)],
        check_model=False,
    )


async def direct(harness: Harness, index: int) -> float:
    start = time.perf_counter()
    result = await harness.run("do it", session=f"direct-{index}", instructions=CHILD)
    elapsed = time.perf_counter() - start
    if result.output != "child done":
        raise RuntimeError(f"direct run answered {result.output!r}")
    return elapsed


async def via_subagent(harness: Harness, index: int) -> float:
    started = ended = None
    stream = harness.stream("lead", session=f"lead-{index}")
    async for event in stream:
        if isinstance(event, FunctionExecutionStart) and event.data.function_id == "agent::child":
            started = time.perf_counter()
        elif isinstance(event, FunctionExecutionEnd) and event.data.function_id == "agent::child":
            ended = time.perf_counter()
    if started is None or ended is None or stream.result.output != "lead done":
        raise RuntimeError(f"the lead run did not call its subagent: {stream.result}")
    return ended - started


def _ms(samples: list[float]) -> dict[str, float]:
    p50, p99 = p50_p99(samples)
    return {"p50_ms": round(p50 * 1e3, 3), "p99_ms": round(p99 * 1e3, 3)}


async def measure(samples: int, warmup: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tackroom-subagents-") as tmp:
        async with build(Path(tmp)) as harness:
            for i in range(warmup):
                await direct(harness, -1 - i)
                await via_subagent(harness, -1 - i)
            directs: list[float] = []
            waits: list[float] = []
            for i in range(samples):
                directs.append(await direct(harness, i))
                waits.append(await via_subagent(harness, i))
    overheads = [wait - own for wait, own in zip(waits, directs, strict=True)]
    overhead = _ms(overheads)
    return {
        "direct_child_run": _ms(directs),
        "subagent_call_wait": _ms(waits),
        "overhead": {
            **overhead,
            "mean_ms": round(statistics.fmean(overheads) * 1e3, 3),
            "samples": samples,
            "target_p50_ms": TARGET_P50_MS,
            "pass": overhead["p50_ms"] <= TARGET_P50_MS,
        },
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a few samples (the smoke test)")
    args = parser.parse_args(argv)
    samples, warmup = (5, 1) if args.quick else (args.samples, 10)
    figures = asyncio.run(measure(samples, warmup))
    report = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "subagents",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "backend": "embedded",
        **figures,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
