"""Sandbox benchmark: what running a command in the sandbox costs; prints one JSON document.

    python bench/sandbox.py [--quick]

Figures (bench/README.md says how each is measured):
- ``cold_start``: a sandboxed ``true``, start to result, one call after another, at the ``bwrap``
  level (namespaces, mounts, a pids cgroup per call where the worker is root, rlimits, the
  timeout machinery) and at the ``process`` level; ``bwrap_floor`` is the same bwrap command line
  run by a blocking ``subprocess.run`` with no cgroup (what bubblewrap itself costs here);
  ``python`` is ``python3 -E -s -c pass`` in the sandbox (what ``code::python`` starts with);
- ``bus_round_trip``: ``sandbox::run`` and ``shell::run`` (``true``) triggered on an in-memory
  engine hosting the sandbox and shell workers;
- ``gated_turn``: one agent turn through ``tackroom.Harness`` with the gate on (policy and
  approvals, auto-approve) whose tool call is ``shell::run`` ``true``, against the same turn
  calling ``calc::add``: the difference is a sandboxed command's share of a turn;
- ``boot``: starting a host with the sandbox and shell workers over one with none (the sandbox
  probes bubblewrap once at start).

Targets sit next to the figures with a pass flag; informational only (the exit code is 0 whatever
the figures). Wall clock on a shared machine: compare medians from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine

from tackroom import Harness
from tackroom.contracts.messages import FunctionResultMessage
from tackroom.contracts.sandbox import RunRequest
from tackroom.engine import open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.runtime.config import AgentSettings
from tackroom.testing import MEMORY_URL, Script, ScriptedProvider, ScriptTurn
from tackroom.workers.sandbox.argv import RLimits, bwrap_argv, sandbox_env
from tackroom.workers.sandbox.config import SandboxConfig
from tackroom.workers.sandbox.sandbox import Sandbox
from tackroom.workers.sandbox.worker import WORKER as SANDBOX
from tackroom.workers.shell.worker import WORKER as SHELL

SCHEMA_VERSION = 1
COLD_START_TARGET_MS = 15.0
GATED_WORKERS = ["engine", "sessions", "orchestrator", "utilities", "policy", "approvals"]


def summary(samples: list[float]) -> dict[str, float]:
    """p50/p90/p99 and mean of ``samples`` (seconds) in milliseconds."""
    ordered = sorted(samples)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p90_ms": round(rank(0.90) * 1000, 3),
        "p99_ms": round(rank(0.99) * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


async def timed(count: int, call: Callable[[], Awaitable[Any]]) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def sandbox_runs(root: Path, level: str, argv: list[str], count: int) -> dict[str, Any]:
    sandbox = await Sandbox.prepare(SandboxConfig(workspace_root=root, level=level))
    status = sandbox.status()
    if not status.available:
        return {"available": False, "reason": status.reason}

    async def once() -> None:
        result = await sandbox.run(RunRequest(session_id="bench", argv=argv))
        if result.exit_code != 0:
            raise RuntimeError(f"{argv} failed in the sandbox: {result.stderr}")

    await timed(max(3, count // 10), once)  # warm-up
    return {"process_limit": status.process_limit, **summary(await timed(count, once))}


def bwrap_floor(root: Path, count: int) -> dict[str, Any]:
    """The bwrap command line alone, run by a blocking subprocess.run (no cgroup, no asyncio)."""
    from tackroom.workers.sandbox.host import find_layout, visible_program

    workspace = root / "floor"
    workspace.mkdir(parents=True, exist_ok=True)
    config = SandboxConfig()
    limits = RLimits(
        memory_bytes=config.memory_mb << 20,
        cpu_seconds=config.cpu_seconds,
        processes=config.max_processes,
        file_bytes=config.max_file_bytes,
        open_files=config.max_open_files,
    )
    argv = bwrap_argv(
        bwrap="bwrap",
        layout=find_layout(network=False, prlimit=visible_program("prlimit")),
        workspace=workspace,
        cwd_parts=(),
        network=False,
        env=sandbox_env({}),
        limits=limits,
        tmp_bytes=config.tmp_mb << 20,
        command=["true"],
    )
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        subprocess.run(argv, check=True, env={"PATH": "/usr/bin:/bin"})
        samples.append(time.perf_counter() - start)
    return summary(samples)


async def bus_round_trip(root: Path, count: int) -> dict[str, Any]:
    config = HarnessConfig(
        schema_version=1, worker_config={"sandbox": {"workspace_root": str(root)}}
    )
    call = {"session_id": "bench", "function_call_id": "c1"}
    async with Host(
        engine=open_engine(MEMORY_URL), workers=[SANDBOX, SHELL], config=config
    ) as host:
        engine = host.engine

        async def sandbox_run() -> None:
            await engine.trigger("sandbox::run", {"session_id": "bench", "argv": ["true"]})

        async def shell_run() -> None:
            reply = await engine.trigger("shell::run", {"command": "true", "_call": call})
            if reply["exit_code"] != 0:
                raise RuntimeError(f"shell::run failed: {reply}")

        await timed(max(3, count // 10), shell_run)
        return {
            "sandbox_run": summary(await timed(count, sandbox_run)),
            "shell_run": summary(await timed(count, shell_run)),
        }


async def gated_turns(home: Path, tool: str, arguments: dict[str, Any], count: int) -> Any:
    turn = [ScriptTurn.call(tool, arguments), ScriptTurn.say("done")]
    provider = ScriptedProvider(Script(turn * count), per_session=False, record_requests=False)
    config = HarnessConfig(
        schema_version=1, agent=AgentSettings(workers=GATED_WORKERS, auto_approve=True)
    )
    harness = Harness(
        provider, config=config, home=home, workers=[SANDBOX, SHELL], tools=[tool]
    )  # fmt: skip
    samples = []
    async with harness:
        session = None
        for number in range(count):
            start = time.perf_counter()
            result = await harness.run("go", session=session)
            samples.append(time.perf_counter() - start)
            session = result.session_id
            results = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
            if not result.ok or not results or results[-1].is_error:
                raise RuntimeError(f"turn {number} with {tool} did not run: {result.error}")
    return samples[max(1, count // 10) :]  # the first turns warm up


async def gated_turn(root: Path, count: int) -> dict[str, Any]:
    calc = await gated_turns(root / "calc", "calc::add", {"a": 2, "b": 3}, count)
    shell = await gated_turns(root / "shell", "shell::run", {"command": "true"}, count)
    return {
        "calc_add_turn": summary(calc),
        "shell_run_turn": summary(shell),
        "shell_run_share_ms": round((statistics.median(shell) - statistics.median(calc)) * 1000, 3),
    }


async def boot(root: Path, count: int) -> dict[str, Any]:
    config = HarnessConfig(
        schema_version=1, worker_config={"sandbox": {"workspace_root": str(root)}}
    )

    async def host_with(workers: list[Any]) -> None:
        async with Host(engine=open_engine(MEMORY_URL), workers=workers, config=config):
            pass

    bare = await timed(count, lambda: host_with([]))
    full = await timed(count, lambda: host_with([SANDBOX, SHELL]))
    return {
        "no_workers": summary(bare),
        "sandbox_and_shell": summary(full),
        "added_ms": round((statistics.median(full) - statistics.median(bare)) * 1000, 3),
    }


async def main(quick: bool) -> dict[str, Any]:
    runs = 20 if quick else 300
    load_before = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="tackroom-bench-sandbox-") as folder:
        root = Path(folder)
        bwrap = await sandbox_runs(root / "ws", "bwrap", ["true"], runs)
        cold = {
            "bwrap": bwrap,
            "process": await sandbox_runs(root / "ws", "process", ["true"], runs),
            "bwrap_floor": bwrap_floor(root, runs),
            "python": await sandbox_runs(
                root / "ws", "bwrap", ["python3", "-E", "-s", "-c", "pass"], runs // 3
            ),
        }
        target = {
            "p50_ms": COLD_START_TARGET_MS,
            "pass": bool(bwrap.get("p50_ms", float("inf")) <= COLD_START_TARGET_MS),
        }
        figures = {
            "cold_start": {**cold, "target": target},
            "bus_round_trip": await bus_round_trip(root / "bus", runs),
            "gated_turn": await gated_turn(root / "turns", 30 if quick else 200),
            "boot": await boot(root / "boot", 5 if quick else 20),
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "sandbox",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {**machine(), "euid": os.geteuid()},
        "load": {"before_1m": load_before, "after_1m": round(os.getloadavg()[0], 2)},
        "quick": quick,
        "figures": figures,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    options = parser.parse_args()
    json.dump(asyncio.run(main(options.quick)), sys.stdout, indent=2)
    sys.stdout.write("\n")
