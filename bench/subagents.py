"""Subagent benchmark: what calling an agent as a subagent costs over running it directly.

    python bench/subagents.py [--samples N] [--quick]

One embedded harness (temp SQLite file, WAL), gate thin, a ``FunctionModel`` playing the agents:
``child`` answers at once (one model call, no tools); a lead calls one tool, then answers. Each
sample, interleaved:

- **direct**: ``Harness.run`` of the child agent's instructions as a run of its own — the wall
  time from the call to its result (``run::start``, one model call, ``agent_end``);
- **tool**: a lead run calling ``noop`` (a tool that returns at once), timed on the lead's event
  stream from the ``message_complete`` of the answer asking for the call to the call's
  ``function_execution_end``: what any tool call costs the lead (its batch step and commits, the
  next step's events);
- **subagent**: the same lead calling ``agent::child`` instead, timed the same way: the batch
  step, the agents worker starting the child run, the lead parking, the child run itself, its
  outcome written, the lead woken and resumed with the result. (The call's
  ``function_execution_start`` is committed with the parking and the child's start, so timing
  from it would leave the start out; ``start_event_to_end`` reports that window too.)

``overhead`` = subagent - tool - direct, per sample: what delegating costs over a tool call that
ran the child agent in line — the child's start through the agents worker, the parking, the
outcome and the wake. Target: p50 ≤ 2 ms on embedded. ``subagent_minus_direct`` (subagent -
direct) keeps the lead's own call step in, as a stricter figure. Timing is wall clock on a
shared machine (``machine.loadavg_1m`` says how shared).
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
from tackroom.contracts.events import (
    FunctionExecutionEnd,
    FunctionExecutionStart,
    MessageComplete,
)
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
)
from tackroom.harness.models import ModelChunk, ToolCall
from tackroom.runtime import HarnessConfig
from tackroom.testing import FunctionModel, ModelInfo

SCHEMA_VERSION = 1
TARGET_P50_MS = 2.0
CHILD = "[agent:child]"
CHILD_TOOL = "agent__child"
TOOL = "noop"
TOOL_LEAD = "[lead:tool]"


def respond(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
    if CHILD in info.system_prompt:
        return "child done"
    if any(isinstance(m, FunctionResultMessage) for m in messages):
        return "lead done"
    if TOOL_LEAD in info.system_prompt:
        return [ToolCall(TOOL, {}, id="call-tool")]
    return [ToolCall(CHILD_TOOL, {"task": "do it"}, id="call-child")]


def noop() -> str:
    """Answers at once."""
    return "done"


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
        tools=[noop],
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


async def lead_call(harness: Harness, index: int, *, tool: str) -> tuple[float, float]:
    """A lead run calling ``tool``: (from the answer asking for the call to its end, from the
    call's start event to its end)."""
    asked = started = ended = None
    instructions = TOOL_LEAD if tool == TOOL else None
    stream = harness.stream("lead", session=f"lead-{tool}-{index}", instructions=instructions)
    async for event in stream:
        if isinstance(event, MessageComplete) and asked is None and _calls(event, tool):
            asked = time.perf_counter()
        elif isinstance(event, FunctionExecutionStart):
            started = time.perf_counter()
        elif isinstance(event, FunctionExecutionEnd):
            ended = time.perf_counter()
    if asked is None or started is None or ended is None or stream.result.output != "lead done":
        raise RuntimeError(f"the lead run did not call {tool}: {stream.result}")
    return ended - asked, ended - started


def _calls(event: MessageComplete, tool: str) -> bool:
    message = event.data.message
    return isinstance(message, AssistantMessage) and any(
        isinstance(block, FunctionCallBlock) and block.tool_name == tool
        for block in message.content
    )


def _ms(samples: list[float]) -> dict[str, float]:
    p50, p99 = p50_p99(samples)
    return {"p50_ms": round(p50 * 1e3, 3), "p99_ms": round(p99 * 1e3, 3)}


async def measure(samples: int, warmup: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tackroom-subagents-") as tmp:
        async with build(Path(tmp)) as harness:
            for i in range(warmup):
                await direct(harness, -1 - i)
                await lead_call(harness, -1 - i, tool=TOOL)
                await lead_call(harness, -1 - i, tool=CHILD_TOOL)
            directs: list[float] = []
            tools: list[float] = []
            waits: list[float] = []
            start_to_end: list[float] = []
            for i in range(samples):
                directs.append(await direct(harness, i))
                tools.append((await lead_call(harness, i, tool=TOOL))[0])
                wait, from_start = await lead_call(harness, i, tool=CHILD_TOOL)
                waits.append(wait)
                start_to_end.append(from_start)
    overheads = [wait - tool - own for wait, tool, own in zip(waits, tools, directs, strict=True)]
    overhead = _ms(overheads)
    over_direct = [wait - own for wait, own in zip(waits, directs, strict=True)]
    return {
        "direct_child_run": _ms(directs),
        "tool_call_wait": _ms(tools),
        "subagent_call_wait": _ms(waits),
        "start_event_to_end": _ms(start_to_end),
        "overhead": {
            **overhead,
            "mean_ms": round(statistics.fmean(overheads) * 1e3, 3),
            "samples": samples,
            "target_p50_ms": TARGET_P50_MS,
            "pass": overhead["p50_ms"] <= TARGET_P50_MS,
        },
        "subagent_minus_direct": _ms(over_direct),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a few samples (the smoke test)")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error(f"--samples must be at least 1, not {args.samples}")
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
