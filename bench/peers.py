"""Peers benchmark: the same agent turn on tackroom and on its peers; prints one JSON document.

    python bench/peers.py [--rounds 3] [--turns 200] [--only NAME]...
    python bench/peers.py --system NAME      # one run of one system, in this process (JSON)

The turn (``peers_systems/workload.py``): a user prompt; model call 1 streams one tool call,
``add(a=2, b=3)``; the tool runs; model call 2 streams the answer as 50 text deltas and ends. Each
system's own scripted or fake model answers at once, and each system persists the session:

- ``tackroom``: ``tackroom.Harness``, default durable config (embedded engine, SQLite, WAL);
- ``floor``: a hand-written asyncio loop appending each message to SQLite (WAL, NORMAL);
- ``langgraph``: a ``StateGraph`` (model node, ``ToolNode``) with ``AsyncSqliteSaver``;
- ``openai_agents``: the OpenAI Agents SDK, ``Runner.run_streamed`` with a ``SQLiteSession``;
- ``pydantic_ai``: Pydantic AI with ``FunctionModel``; it has no store of its own, so the run's
  messages are written to SQLite after the run.

Each run of a system is a process of its own (``--system``): it opens the system, runs warm-up
turns, then ``--turns`` turns each in a fresh session and ``--same-session`` turns in one session,
and reports p50/p90 per turn of the wall clock and of the process's CPU time. The driver runs
every system once per round, in an order rotated each round, for ``--rounds`` rounds (>= 3 for
figures worth quoting), and reports each figure as the median over the rounds, with ratios to the
floor and to tackroom. A peer that is not installed is reported as skipped
(``pip install 'tackroom[bench]'``). The exit code is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from _common import machine
from peers_systems import FLOOR, PEERS, SYSTEMS, TACKROOM, System
from peers_systems.workload import ANSWER, DELTAS, USER_TEXT, SystemModule, measure

SCHEMA_VERSION = 1
SKIPPED = "not installed: pip install 'tackroom[bench]'"
CHILD_ENV = {
    # No peer may phone home: LangSmith and the Agents SDK's trace export stay off.
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
}
VARIANTS = ("fresh_session", "same_session")
CLOCKS = ("wall", "cpu")


# -- one system, in this process -------------------------------------------------------------------
def missing(system: System) -> list[str]:
    """The import names ``system`` needs that cannot be found."""
    absent = []
    for name in system.needs:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            absent.append(name)
    return absent


def run_system(
    name: str, *, turns: int, warmup: int, same_session: int, tmp: str | None = None
) -> dict[str, Any]:
    system = SYSTEMS[name]
    absent = missing(system)
    if absent:
        return {"system": name, "skipped": SKIPPED, "missing": absent}
    module = cast(SystemModule, importlib.import_module(f"peers_systems.{system.module}"))
    with tempfile.TemporaryDirectory(prefix=f"tackroom-peers-{name}-", dir=tmp) as directory:
        figures = asyncio.run(
            measure(
                module,
                Path(directory),
                turns=turns,
                warmup=warmup,
                same_session_turns=same_session,
            )
        )
    return {
        "system": name,
        **module.describe(),
        **figures,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


# -- the driver ------------------------------------------------------------------------------------
def spawn(name: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--system",
        name,
        "--turns",
        str(args.turns),
        "--warmup",
        str(args.warmup),
        "--same-session",
        str(args.same_session),
        *(["--tmp", args.tmp] if args.tmp else []),
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            check=False,
            env={**os.environ, **CHILD_ENV},
        )
    except subprocess.TimeoutExpired:
        return {"system": name, "error": f"no result within {args.timeout:g} s"}
    if done.returncode != 0:
        return {"system": name, "error": done.stderr.strip().splitlines()[-5:]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def median_of(runs: list[dict[str, Any]], variant: str, clock: str, figure: str) -> float:
    return round(float(statistics.median(run[variant][clock][figure] for run in runs)), 3)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over the rounds of each figure; what the runs said about the system, once."""
    first = runs[0]
    if "skipped" in first:
        return first
    good = [run for run in runs if "error" not in run]
    if not good:
        return {"system": first["system"], "error": first["error"]}
    summary: dict[str, Any] = {
        key: value
        for key, value in good[0].items()
        if key not in ("loadavg_1m", "open_ms", *VARIANTS)
    }
    for variant in VARIANTS:
        if variant not in good[0]:
            continue
        summary[variant] = {
            f"{clock}_{figure}": median_of(good, variant, clock, figure)
            for clock in CLOCKS
            for figure in ("p50_ms", "p90_ms")
        }
        summary[variant]["samples_per_round"] = good[0][variant]["samples"]
    summary["open_ms"] = round(statistics.median(run["open_ms"] for run in good), 1)
    summary["rounds"] = len(good)
    summary["per_round_p50_ms"] = {
        f"{variant}.{clock}": [run[variant][clock]["p50_ms"] for run in good]
        for variant in VARIANTS
        if variant in good[0]
        for clock in CLOCKS
    }
    if len(good) < len(runs):
        summary["failed_rounds"] = [run["error"] for run in runs if "error" in run]
    return summary


def share(value: float, base: float) -> float:
    """``value / base``, to two decimals (four when it is below 0.1, as the floor's are)."""
    ratio = value / base
    return round(ratio, 2 if ratio >= 0.1 else 4)


def ratios(systems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """p50 of each system over the floor's and over tackroom's, per variant and clock."""
    measured = {name: s for name, s in systems.items() if "fresh_session" in s}
    table: dict[str, Any] = {}
    for variant in VARIANTS:
        for clock in CLOCKS:
            key = f"{clock}_p50_ms"
            values = {n: s[variant][key] for n, s in measured.items() if variant in s}
            entry: dict[str, Any] = {}
            for base in (FLOOR, TACKROOM):
                if values.get(base):
                    entry[f"vs_{base}"] = {n: share(v, values[base]) for n, v in values.items()}
            table[f"{variant}.{key}"] = entry
    return table


def headline(systems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """tackroom against the fastest peer that ran, per variant and clock, in words."""
    lines: dict[str, Any] = {}
    ours = systems.get(TACKROOM, {})
    for variant in VARIANTS:
        for clock in CLOCKS:
            key = f"{clock}_p50_ms"
            peers = {n: systems[n][variant][key] for n in PEERS if variant in systems.get(n, {})}
            if variant not in ours or not peers:
                continue
            fastest = min(peers, key=peers.__getitem__)
            ratio = peers[fastest] / ours[variant][key]
            if ratio >= 1:
                said = f"tackroom is {ratio:.2f}x faster than the fastest peer ({fastest})"
            else:
                said = f"tackroom is {1 / ratio:.2f}x slower than the fastest peer ({fastest})"
            lines[f"{variant}.{key}"] = {
                "fastest_peer": fastest,
                "fastest_peer_over_tackroom": round(ratio, 2),
                "says": f"{said}: {ours[variant][key]:.3f} ms vs {peers[fastest]:.3f} ms",
            }
    return lines


def drive(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    load_at_start = round(os.getloadavg()[0], 2)
    names = [name for name in SYSTEMS if not args.only or name in args.only]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    active = []
    for name in names:
        absent = missing(SYSTEMS[name])
        if absent:
            runs[name].append({"system": name, "skipped": SKIPPED, "missing": absent})
        else:
            active.append(name)
    for round_index in range(args.rounds):
        shift = round_index % max(1, len(active))
        for name in active[shift:] + active[:shift]:
            runs[name].append(spawn(name, args))
    systems = {name: summarize(results) for name, results in runs.items()}
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "peers",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            **machine(),
            "loadavg_1m_at_start": load_at_start,
            "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "workload": {
            "turn": "a user prompt; model call 1 streams one tool call add(a=2, b=3); the tool"
            " runs; model call 2 streams the answer; the session is persisted",
            "prompt": USER_TEXT,
            "answer_chars": len(ANSWER),
            "answer_deltas": len(DELTAS),
            "model": "each system's scripted model, zero latency",
            "fresh_session": f"{args.turns} turns, each in a new session, after"
            f" {args.warmup} warm-up turns",
            "same_session": f"{args.same_session} turns one after another in one session",
            "clocks": "wall: perf_counter around the turn; cpu: process_time (every thread of"
            " the system's process)",
            "databases": args.tmp or tempfile.gettempdir(),
            "rounds": f"{args.rounds}: every system once per round, each run a new process,"
            " the order rotated each round; figures are medians over the rounds",
        },
        "systems": systems,
        "ratios": ratios(systems),
        "tackroom_vs_fastest_peer": headline(systems),
        "ratios_read": "vs_X = the system's p50 / X's p50 (> 1: slower than X)",
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--turns", type=int, default=200, help="fresh-session turns per run")
    parser.add_argument("--warmup", type=int, default=20, help="warm-up turns per run")
    parser.add_argument(
        "--same-session", type=int, default=20, help="turns in one session per run (0: none)"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=list(SYSTEMS),
        default=[],
        metavar="NAME",
        help=f"run only this system (repeatable): {', '.join(SYSTEMS)}",
    )
    parser.add_argument(
        "--tmp", metavar="DIR", help="where the databases go (default: the system's temp dir)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--system", choices=list(SYSTEMS), help="run one system here (a child)")
    args = parser.parse_args()
    if args.system:
        result = run_system(
            args.system,
            turns=args.turns,
            warmup=args.warmup,
            same_session=args.same_session,
            tmp=args.tmp,
        )
    else:
        result = drive(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
