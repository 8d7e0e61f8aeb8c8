"""Queue throughput on NATS with 1 and 2 consumer processes; prints one JSON document.

    python bench/queue_scaling.py [--engine nats://HOST:PORT] [--messages N] [--work-us W]
                                  [--wait-ms MS] [--concurrency C] [--groups G]

For each process count the queue is filled first (``messages`` calls of ``scale::work``, spread
over ``groups`` groups, or none with ``--groups 0``), then that many consumer processes are
started at once. Each handler burns ``work_us`` microseconds of CPU (a stand-in for work that
holds the GIL, as parsing and prompt building do), then waits ``wait_ms`` milliseconds (a stand-in
for I/O: a model or tool call), with ``concurrency`` handlers per process. Throughput is messages
divided by the time from the first handled message to the last, over all processes. Without
``--engine`` a ``nats-server`` of its own is started. Timing is wall clock on a shared machine:
compare the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine

from tackroom.engine import QueueConfig, open_engine
from tackroom.engine.nats import parse_nats_url
from tackroom.testing.nats import nats_server

QUEUE = "scale"
FUNCTION = "scale::work"
CONFIG = QueueConfig(concurrency=32, visibility_timeout=30.0)


def burn(micros: int) -> None:
    end = time.perf_counter() + micros / 1e6
    while time.perf_counter() < end:
        pass


async def consumer(url: str, work_us: int, wait_ms: float, concurrency: int) -> None:
    """One consumer process: handle until SIGTERM, then print ``STATS first last count``."""
    first = last = 0.0
    count = 0
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def work(payload: Any) -> None:
        nonlocal first, last, count
        burn(work_us)
        if wait_ms:
            await asyncio.sleep(wait_ms / 1000)
        last = time.time()
        first = first or last
        count += 1

    engine = open_engine(url)
    await engine.start()
    try:
        await engine.configure_queue(QUEUE, replace(CONFIG, concurrency=concurrency))
        await engine.register_function(FUNCTION, work, worker="bench")
        print("READY", flush=True)
        await stop.wait()
    finally:
        await engine.close()
    print(f"STATS {first} {last} {count}", flush=True)


async def pending(url: str) -> int:
    options = parse_nats_url(url)
    import nats

    nc = await nats.connect(servers=list(options.servers))
    try:
        info = await nc.jetstream().stream_info(f"{options.namespace}_queues")
        return int(info.state.messages)
    finally:
        await nc.close()


async def run_once(base: str, processes: int, args: argparse.Namespace) -> float:
    messages, groups = args.messages, args.groups
    url = f"{base}?namespace=scale{uuid.uuid4().hex[:8]}"
    engine = open_engine(url)
    await engine.start()
    try:
        await engine.configure_queue(QUEUE, CONFIG)
        for n in range(messages):
            group = f"session-{n % groups}" if groups else None
            await engine.enqueue(FUNCTION, {"n": n}, queue=QUEUE, group=group)
    finally:
        await engine.close()
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--consumer",
            url,
            "--work-us",
            str(args.work_us),
            "--wait-ms",
            str(args.wait_ms),
            "--concurrency",
            str(args.concurrency),
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(processes)
    ]
    try:
        deadline = time.monotonic() + 600
        while await pending(url) > 0:
            if time.monotonic() > deadline:
                raise RuntimeError("the consumers did not drain the queue in 10 minutes")
            await asyncio.sleep(0.05)
    finally:
        for child in children:
            child.send_signal(signal.SIGTERM)
    stats = []
    for child in children:
        out, _ = await child.communicate()
        for line in out.decode().splitlines():
            if line.startswith("STATS "):
                first, last, count = line.split()[1:]
                stats.append((float(first), float(last), int(count)))
    handled = sum(count for _, _, count in stats)
    started = min(first for first, _, count in stats if count)
    finished = max(last for _, last, _ in stats)
    return handled / (finished - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", help="nats://HOST:PORT (default: a server of its own)")
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--work-us", type=int, default=300)
    parser.add_argument("--wait-ms", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=32, help="handlers per process")
    parser.add_argument("--groups", type=int, default=0, help="spread over G groups (0: none)")
    parser.add_argument("--consumer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consumer:
        await consumer(args.consumer, args.work_us, args.wait_ms, args.concurrency)
        return
    with tempfile.TemporaryDirectory(prefix="tackroom-scale-") as tmp:
        if args.engine:
            base = args.engine.split("?")[0]
            results = await measure_all(base, args)
        else:
            with nats_server(store_dir=Path(tmp)) as server:
                results = await measure_all(server.url, args)
    report = {
        "schema_version": 1,
        "benchmark": "queue_scaling",
        "engine": "nats (own server)" if not args.engine else "nats (given)",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "messages": args.messages,
        "groups": args.groups,
        "work_us": args.work_us,
        "wait_ms": args.wait_ms,
        "concurrency_per_process": args.concurrency,
        "machine": machine(),
        "results": results,
    }
    print(json.dumps(report, indent=2))


async def measure_all(base: str, args: argparse.Namespace) -> dict[str, Any]:
    one = await run_once(base, 1, args)
    two = await run_once(base, 2, args)
    return {
        "msgs_per_s_1_process": round(one, 1),
        "msgs_per_s_2_processes": round(two, 1),
        "ratio_2_to_1": round(two / one, 2),
    }


if __name__ == "__main__":
    asyncio.run(main())
