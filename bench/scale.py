"""Turns per second with 1, 2 and 4 harness processes on a 3-node NATS cluster; one JSON document.

    python bench/scale.py [--processes 1 2 4] [--turns 160] [--clients 16] [--think 0.1]
                          [--partitions 16] [--engine nats://h1:p1,h2:p2,h3:p3]

Without ``--engine`` it starts a cluster of its own on this machine: three ``nats-server``
processes joined by routes, JetStream on each with its own store
(:class:`tackroom.testing.nats.NatsCluster`); every namespace is created with ``replicas=3``.

For each process count ``N``, on a fresh namespace, ``N`` harness processes are started (``python
bench/scale.py --serve URL``: a ``tackroom.Harness`` booting what ``tackroom run`` boots — engine,
sessions, orchestrator, files, utilities — and the scripted model with a per-session,
transcript-cursor script). A client process (this one, a ``Harness`` attached to the bus without
workers of its own) runs ``--turns`` turns, ``--clients`` at a time, each in a fresh session: the
model thinks ``--think`` seconds, calls ``calc::add``, thinks again and answers. The figure is
turns / wall time from the first start to the last end, after a warm-up round; the model's think
time is fixed, so the figure measures how much the harness processes can carry at once, not the
model. ``turn_ms`` is each turn's latency (p50/p99). Throughput is bounded by the machine (every
process, the three servers and the client share its cores) and by the namespace's ordered
``partitions`` (at most that many sessions' steps run at once, over all processes: docs/nats.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import machine, p50_p99

from tackroom import Harness
from tackroom.runtime import HarnessConfig
from tackroom.testing.nats import nats_cluster

ANSWER = "2 + 3 = 5."


def script(think: float) -> list[dict[str, Any]]:
    return [
        {
            "tool_calls": [{"function_id": "calc::add", "arguments": {"a": 2, "b": 3}}],
            "delay": think,
        },
        {"text": ANSWER, "delay": think},
    ]


def _config(workdir: Path) -> HarnessConfig:
    return HarnessConfig(
        schema_version=1,
        worker_config={
            "files": {"workspace_root": str(workdir / "workspaces")},
            "orchestrator": {"cwd": str(workdir)},
            "scripted": {"cursor": "transcript", "per_session": True, "record_requests": False},
        },
    )


async def serve(url: str, workdir: Path, think: float) -> None:
    """A harness process: boot, say ``READY``, serve until SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    harness = Harness("scripted:scale", config=_config(workdir), engine=url, script=script(think))
    async with harness:
        print("READY", flush=True)
        await stop.wait()


async def _drive(url: str, workdir: Path, *, turns: int, clients: int) -> list[float]:
    """Run ``turns`` turns, ``clients`` at a time, each in a fresh session; their latencies."""
    client = Harness(
        "scripted:scale", config=_config(workdir), engine=url, attach=True, tools=["calc::*"]
    )
    latencies: list[float] = []
    gate = asyncio.Semaphore(clients)
    tag = uuid.uuid4().hex[:6]

    async def one(index: int) -> None:
        async with gate:
            started = time.perf_counter()
            result = await client.run("What is 2 + 3?", session=f"b{tag}-{index}")
            latencies.append(time.perf_counter() - started)
            if (result.state, result.stop_reason, result.output) != ("stopped", "end", ANSWER):
                raise RuntimeError(f"turn {index} did not run as scripted: {result}")

    async with client, asyncio.TaskGroup() as group:
        for index in range(turns):
            group.create_task(one(index))
    return latencies


async def measure(
    url: str, processes: int, *, turns: int, clients: int, think: float
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tackroom-scale-") as scratch:
        workdir = Path(scratch)
        command = [sys.executable, __file__, "--serve", url, str(workdir), "--think", str(think)]
        children: list[subprocess.Popen[bytes]] = []
        try:
            # One after the other, each awaited until it says READY.
            for _ in range(processes):
                child = await asyncio.to_thread(subprocess.Popen, command, stdout=subprocess.PIPE)
                children.append(child)
                assert child.stdout is not None
                line = await asyncio.to_thread(child.stdout.readline)
                if not line.startswith(b"READY"):
                    raise RuntimeError(f"a harness process did not start: {line!r}")
            await _drive(url, workdir, turns=max(clients, 16), clients=clients)  # warm-up
            started = time.perf_counter()
            latencies = await _drive(url, workdir, turns=turns, clients=clients)
            wall = time.perf_counter() - started
        finally:
            for child in children:
                child.send_signal(signal.SIGTERM)
            for child in children:
                try:
                    child.wait(20)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
    p50, p99 = p50_p99([s * 1000 for s in latencies])
    print(f"{processes} process(es): {turns / wall:.1f} turns/s", file=sys.stderr)
    return {
        "processes": processes,
        "turns": turns,
        "seconds": round(wall, 2),
        "turns_per_s": round(turns / wall, 1),
        "turn_ms": {"p50": round(p50, 1), "p99": round(p99, 1)},
    }


def _namespaced(base: str, processes: int, partitions: int) -> str:
    namespace = f"scale{processes}x{uuid.uuid4().hex[:6]}"
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}namespace={namespace}&replicas=3&partitions={partitions}"


async def main(args: argparse.Namespace) -> dict[str, Any]:
    before = machine()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tackroom-cluster-") as store:
        if args.engine:
            base, cluster_note = args.engine, "given"
            runs = [
                await measure(
                    _namespaced(base, n, args.partitions),
                    n,
                    turns=args.turns,
                    clients=args.clients,
                    think=args.think,
                )
                for n in args.processes
            ]
        else:
            cluster_note = "3 nats-server processes on this machine, routes, JetStream each"
            with nats_cluster(store_dir=Path(store)) as cluster:
                for n in args.processes:
                    url = _namespaced(cluster.url, n, args.partitions)
                    runs.append(
                        await measure(
                            url, n, turns=args.turns, clients=args.clients, think=args.think
                        )
                    )
    base_rate = runs[0]["turns_per_s"]
    for run in runs:
        run["ratio_to_first"] = round(run["turns_per_s"] / base_rate, 2)
    return {
        "schema_version": 1,
        "machine": before,
        "loadavg_1m_after": machine()["loadavg_1m"],
        "cluster": cluster_note,
        "workload": {
            "turn": "model call (think), calc::add, model call (think), answer",
            "think_s": args.think,
            "clients": args.clients,
            "replicas": 3,
            "partitions": args.partitions,
        },
        "runs": runs,
    }


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--serve", nargs=2, metavar=("URL", "WORKDIR"), help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--turns", type=int, default=160)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--think", type=float, default=0.1)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--engine", help="a NATS cluster URL (default: start one here)")
    return parser.parse_args()


if __name__ == "__main__":
    options = _parse()
    if options.serve:
        asyncio.run(serve(options.serve[0], Path(options.serve[1]), options.think))
    else:
        print(json.dumps(asyncio.run(main(options)), indent=2))
