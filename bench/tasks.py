"""Task graph benchmark: what the ``tasks`` worker adds per step, and a 1,000-step graph.

    python bench/tasks.py [--chain N] [--steps N] [--engine embedded|memory]

One JSON document:

- ``per_step``: a chain of ``--chain`` steps (each depends on the one before) calling a function
  that does nothing but note the time. The gap between two consecutive calls is the whole
  scheduling overhead of one step — commit the finished step's record (compare-and-set),
  enqueue the next, deliver it, read the run, render its input, trigger the function. p50/p99
  in ms; target p50 <= 2 ms on the embedded engine.
- ``graph_1000``: ``--steps`` steps (default 1,000) in ten layers, each step depending on one
  step of the layer before, the same no-op function: wall time from ``tasks::run`` to the run's
  end, per step, and the run record's size at the end (every commit writes it whole).
- ``replay``: how fast a recorded run is replayed offline, in turns per second (target >= 500):
  ``bench/replay.py``'s figure for a ``--replay-turns`` run replayed ``--replay-repeats`` times
  (its docstring says how it is measured).

The engine is a fresh SQLite file (``embedded``, as a harness runs) or in memory; the machine
and its 1-minute load are in the report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine, summarize_ms

from replay import TARGET_TURNS_PER_S
from replay import run as replay_run
from tackroom.contracts import tasks as c
from tackroom.engine import Engine, open_engine
from tackroom.kit.taskgraph import parse_graph
from tackroom.runtime import Host, load_worker
from tackroom.runtime.config import SCHEMA_VERSION as CONFIG_VERSION
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

SCHEMA_VERSION = 1


class Clock:
    def __init__(self) -> None:
        self.calls: list[float] = []
        self.until = 0
        self.reached = asyncio.Event()

    def note(self) -> None:
        self.calls.append(time.perf_counter())
        if len(self.calls) >= self.until:
            self.reached.set()


def _worker(clock: Clock) -> WorkerSpec[WorkerConfig]:
    async def start(ctx: WorkerContext[WorkerConfig]) -> None:
        async def noop(payload: Any) -> dict[str, Any]:
            clock.note()
            return {}

        await ctx.register_function("bench::noop", noop)

    return WorkerSpec(name="bench", description="no-op", config_model=WorkerConfig, start=start)


def chain(n: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"id": "s0", "call": "bench::noop", "input": {}}]
    for i in range(1, n):
        steps.append(
            {"id": f"s{i}", "call": "bench::noop", "input": {}, "depends_on": [f"s{i - 1}"]}
        )
    return {"name": "chain", "steps": steps}


def layered(n: int, *, layers: int = 10) -> dict[str, Any]:
    width = max(1, n // layers)
    steps: list[dict[str, Any]] = []
    for i in range(n):
        step: dict[str, Any] = {"id": f"s{i}", "call": "bench::noop", "input": {}}
        if i >= width:
            step["depends_on"] = [f"s{i - width}"]
        steps.append(step)
    return {"name": "layered", "steps": steps, "concurrency": 64}


async def run_graph(
    engine: Engine, graph: dict[str, Any], run_id: str, clock: Clock
) -> tuple[float, c.TaskRun]:
    """Run ``graph`` to its end: wait for its last call (reading the run's record while it
    runs would load the same event loop), then for the record to say so."""
    spec = parse_graph(graph)
    clock.until = len(clock.calls) + len(spec.steps)
    clock.reached.clear()
    start = time.perf_counter()
    await c.RUN.call(engine, c.TaskRunRequest(graph=spec, run_id=run_id))
    await clock.reached.wait()
    pause = 0.001
    while True:
        run = await c.RUNS_SCOPE.get(engine, run_id)
        if run is not None and run.terminal:
            break
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.02)
    elapsed = time.perf_counter() - start
    if run.status != "succeeded":
        raise SystemExit(f"run {run_id} {run.status}: {run.error}")
    return elapsed, run


async def main(args: argparse.Namespace) -> dict[str, Any]:
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        url = "embedded::memory:" if args.engine == "memory" else f"embedded:{Path(tmp) / 'e.db'}"
        config = HarnessConfig(schema_version=CONFIG_VERSION)
        workers = [load_worker("engine"), load_worker("tasks"), _worker(clock)]
        async with Host(engine=open_engine(url), workers=workers, config=config) as host:
            engine = host.engine
            await run_graph(engine, chain(20), "warm-up", clock)
            clock.calls.clear()
            await run_graph(engine, chain(args.chain), "chain", clock)
            gaps = [b - a for a, b in zip(clock.calls, clock.calls[1:], strict=False)]
            elapsed, run = await run_graph(engine, layered(args.steps), "layered", clock)
            size = len(json.dumps(run.model_dump(mode="json", exclude_defaults=True)))
    replayed = await replay_run(args.replay_turns, args.replay_repeats, quick=False)
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "tasks",
        "engine": args.engine,
        "machine": machine(),
        "per_step": {"chain": args.chain, **summarize_ms(gaps), "target_p50_ms": 2.0},
        "graph_1000": {
            "steps": args.steps,
            "layers": 10,
            "wall_s": round(elapsed, 3),
            "per_step_ms": round(elapsed / args.steps * 1e3, 3),
            "record_bytes": size,
        },
        "replay": {
            "turns": args.replay_turns,
            "repeats": args.replay_repeats,
            "turns_per_s": replayed["results"]["turns_per_s"],
            "cpu_turns_per_s": replayed["results"]["cpu_turns_per_s"],
            "ms_per_turn": replayed["results"]["ms_per_turn"],
            "target_turns_per_s": TARGET_TURNS_PER_S,
            "pass": replayed["results"]["turns_per_s"] >= TARGET_TURNS_PER_S,
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chain", type=int, default=20)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--engine", choices=["embedded", "memory"], default="embedded")
    parser.add_argument("--replay-turns", type=int, default=20)
    parser.add_argument("--replay-repeats", type=int, default=10)
    arguments = parser.parse_args()
    if arguments.replay_turns < 2 or arguments.replay_repeats < 1:
        parser.error("--replay-turns must be at least 2 and --replay-repeats at least 1")
    print(json.dumps(asyncio.run(main(arguments)), indent=2))
