"""Replay benchmark: how fast a recorded run is driven again offline; prints one JSON document.

    python bench/replay.py [--quick] [--turns N] [--repeats R]

A run of N turns (default 20: a long agent run) is recorded on an embedded harness (temp SQLite
file): the scripted model calls the Python tool ``add`` in each of the first N-1 turns and
streams an answer in the last, so a turn is one model call and, but for the last, one tool call.
Its cassette is exported and replayed R times (``tackroom.harness.replay.replay``: a fresh
in-memory engine, the sessions worker, the real orchestrator, the provider and the tool
answering from the cassette, the request of every model call checked against the recorded one,
and the session compared byte for byte at the end). A one-turn run is replayed as often, so the
fixed cost of a replay (booting its harness, the final comparison) is measured apart from the
cost per turn:

- ``turns_per_s``: (N - 1) / (median replay of the N-turn run - median replay of the 1-turn
  run): turns replayed per second once a replay is going (target >= 500);
- ``cpu_turns_per_s``: the same on this process's CPU time (every worker runs in it), which
  the load of other processes does not change;
- ``replay_s``: the median whole replay of each run, harness boot included;
- ``export_ms``: reading the N-turn run's cassette from the stores.

The orchestrator's cost per turn grows with the transcript (its record and the session path a
model call reads), so ``--turns 200`` shows a lower rate than the default.

Targets are informational (the exit code is 0 whatever the figures); timings are wall clock on a
shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine

from tackroom import Harness
from tackroom.contracts.cassette import Cassette
from tackroom.harness.replay import export_cassette, replay

SCHEMA_VERSION = 1
TARGET_TURNS_PER_S = 500.0
ANSWER = "The running total is in the transcript; the last sum was computed by add. " * 4


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script(turns: int) -> list[dict[str, Any]]:
    calls = [
        {"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}, "id": f"c{i}"}]}
        for i in range(turns - 1)
    ]
    return [*calls, {"text": ANSWER}]


async def record(home: Path, turns: int) -> tuple[Cassette, float]:
    """The cassette of a ``turns``-turn run, and the seconds its export took."""
    async with Harness(
        "scripted:bench",
        script=script(turns),
        tools=[add],
        home=home,
        max_turns=turns,
        workers=[],
    ) as harness:
        result = await harness.run("Count up.", session=f"s{turns}", run_id=f"run-{turns}")
        if result.output != ANSWER:
            raise SystemExit(f"the recorded run did not finish: {result.stop_reason}")
        started = time.perf_counter()
        cassette = await export_cassette(harness.bus, f"run-{turns}")
        return cassette, time.perf_counter() - started


async def replays(cassette: Cassette, repeats: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds of each replay (CPU: this process, where every worker runs;
    other processes' load does not count)."""
    wall, cpu = [], []
    for _ in range(repeats):
        started, used = time.perf_counter(), time.process_time()
        report = await replay(cassette)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
        if not report.identical:
            raise SystemExit(f"the replay diverged: {report.divergence}")
    return wall, cpu


def per_turn(long: list[float], short: list[float], turns: int) -> float:
    return (statistics.median(long) - statistics.median(short)) / (turns - 1)


async def run(turns: int, repeats: int, *, quick: bool) -> dict[str, Any]:
    load = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="tackroom-replay-bench-") as tmp:
        long, export_s = await record(Path(tmp) / "long", turns)
        short, _ = await record(Path(tmp) / "short", 1)
    await replays(short, 1)  # warm: imports, first boot
    long_s, long_cpu = await replays(long, repeats)
    short_s, short_cpu = await replays(short, repeats)
    wall, cpu = per_turn(long_s, short_s, turns), per_turn(long_cpu, short_cpu, turns)
    rate = round(1 / wall, 1) if wall > 0 else float("inf")
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "replay",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "machine": {**machine(), "loadavg_1m_at_start": load},
        "workload": {
            "turns": turns,
            "tool_calls": turns - 1,
            "repeats": repeats,
            "recorded_on": "embedded engine on a SQLite file, scripted provider, thin gate",
            "replayed_on": "embedded::memory: (sessions + orchestrator + cassette provider/tools)",
        },
        "results": {
            "turns_per_s": rate,
            "ms_per_turn": round(wall * 1e3, 3),
            "cpu_turns_per_s": round(1 / cpu, 1) if cpu > 0 else float("inf"),
            "cpu_ms_per_turn": round(cpu * 1e3, 3),
            "replay_s": {
                f"{turns}_turns_p50": round(statistics.median(long_s), 4),
                "1_turn_p50": round(statistics.median(short_s), 4),
            },
            "export_ms": round(export_s * 1e3, 2),
            "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
            "cassette_bytes": len(long.model_dump_json()),
        },
        "targets": [
            {
                "target": f"turns_per_s >= {TARGET_TURNS_PER_S:g}",
                "value": rate,
                "pass": rate >= TARGET_TURNS_PER_S,
            }
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--turns", type=int, help="turns of the long run (default 20; quick 6)")
    parser.add_argument("--repeats", type=int, help="replays of each run (default 10; quick 2)")
    args = parser.parse_args()
    turns = args.turns or (6 if args.quick else 20)
    repeats = args.repeats or (2 if args.quick else 10)
    if turns < 2 or repeats < 1:
        parser.error("--turns must be at least 2 and --repeats at least 1")
    print(json.dumps(asyncio.run(run(turns, repeats, quick=args.quick)), indent=2))


if __name__ == "__main__":
    main()
