"""Live deltas across the local endpoint: latency and CPU per delta to a subscriber in another
process (``RemoteBus.subscribe``, the way ``tackroom run`` follows a ``tackroom serve``).

This process holds an embedded engine and its :class:`~tackroom.runtime.LocalEndpoint`; a child
process (this script with ``--client``) subscribes through the socket. Frames are
``message_update``-sized live records (``Engine.publish``), each carrying its publish time
(``time.perf_counter_ns``: CLOCK_MONOTONIC, one clock for both processes).

- ``latency``: frames published one every ``interval`` seconds; each frame's delay from
  ``publish`` to the reader's hands, for an in-process ``engine.subscribe`` reader and for the
  remote one at the same time; ``added_p50_us`` = remote p50 - in-process p50. ``idle``: the
  serving process does nothing else; ``busy``: another of its tasks appends stored records
  without pause meanwhile.
- ``cpu``: CPU of both processes (``time.process_time``) per frame, the serving process's less
  what the same frames cost it with no remote reader. ``paced``: frames ``interval`` apart, one
  per poll; ``burst``: back to back in chunks the reader acknowledges (on its stdout) before
  the next, so it never falls behind and a poll brings many.

Prints one JSON document. Timing is wall clock on a shared machine: quote medians and the load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine, p50_p99

from tackroom.engine import Engine, open_engine
from tackroom.harness.remote import RemoteBus
from tackroom.runtime import LocalEndpoint

SCHEMA_VERSION = 1
STREAM, GROUP = "agent::events", "s1"
PAD = "x" * 40


def frame(index: int) -> dict[str, Any]:
    """A live record the size of a coalesced ``message_update``, stamped with its publish time."""
    return {
        "schema_version": 1,
        "type": "message_update",
        "session_id": GROUP,
        "run_id": "run-bench",
        "event_id": f"run-bench:m1:0:u{index}",
        "data": {"message_id": "m1", "stream_id": 0, "kind": "text", "delta": PAD, "index": index},
        "sent_ns": time.perf_counter_ns(),
    }


# -- the client process ----------------------------------------------------------------------------
class Counted:
    """The client's ``trigger``, counting the polls (how many frames one poll brings back)."""

    def __init__(self, bus: RemoteBus) -> None:
        self.polls = 0
        self._trigger = bus.client.trigger
        bus.client.trigger = self  # type: ignore[method-assign]  # the figure counts polls

    async def __call__(self, function_id: str, payload: Any = None, *, timeout: float = 30) -> Any:
        self.polls += 1
        return await self._trigger(function_id, payload, timeout=timeout)


async def client(socket: Path, *, paced: int, chunk: int, chunks: int) -> None:
    bus = await RemoteBus.connect(socket, max_frame_bytes=4 * 1024 * 1024)
    counted = Counted(bus)
    subscription = await bus.subscribe(STREAM, GROUP)
    print("subscribed", flush=True)
    for _ in ("idle", "busy"):
        delays: list[int] = []
        for _ in range(paced):
            record = await subscription.__anext__()
            delays.append(time.perf_counter_ns() - record.data["sent_ns"])
        print(json.dumps({"delays_ns": delays}), flush=True)
    for phase in ("paced", "burst"):
        cpu, counted.polls = time.process_time(), 0
        for _ in range(paced if phase == "paced" else chunks):
            for _ in range(1 if phase == "paced" else chunk):
                await subscription.__anext__()
            if phase == "burst":
                print("ack", flush=True)
        spent = time.process_time() - cpu
        print(json.dumps({"cpu_s": spent, "polls": counted.polls}), flush=True)
    await subscription.aclose()
    await bus.close()


# -- the serving process ---------------------------------------------------------------------------
async def local_delays(engine: Engine, count: int, ready: asyncio.Event) -> list[int]:
    subscription = await engine.subscribe(STREAM, GROUP)
    ready.set()
    delays: list[int] = []
    async for record in subscription:
        delays.append(time.perf_counter_ns() - record.data["sent_ns"])
        if len(delays) == count:
            break
    await subscription.aclose()
    return delays


async def delays(
    engine: Engine, args: argparse.Namespace, lines: asyncio.StreamReader, *, busy: bool
) -> dict[str, float]:
    """Publish-to-reader delays of paced frames, in process and remote (p50/p99 µs); ``busy``:
    while another task of the serving process appends stored records to another group without
    pause (other runs' writes)."""
    ready = asyncio.Event()
    local = asyncio.create_task(local_delays(engine, args.frames, ready))
    await ready.wait()
    writer = asyncio.create_task(keep_writing(engine)) if busy else None
    try:
        await paced(engine, args)
        local_ns = await local
    finally:
        if writer is not None:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
    remote_ns = json.loads(await read_line(lines))["delays_ns"]
    local_p50, local_p99 = p50_p99([d / 1e3 for d in local_ns])
    remote_p50, remote_p99 = p50_p99([d / 1e3 for d in remote_ns])
    return {
        "in_process_p50_us": round(local_p50, 1),
        "in_process_p99_us": round(local_p99, 1),
        "remote_p50_us": round(remote_p50, 1),
        "remote_p99_us": round(remote_p99, 1),
        "added_p50_us": round(remote_p50 - local_p50, 1),
    }


async def keep_writing(engine: Engine) -> None:
    index = 0
    while True:
        index += 1
        await engine.append(STREAM, "other-session", {"n": index, "pad": PAD * 4})
        await asyncio.sleep(0)


async def read_line(stream: asyncio.StreamReader) -> str:
    line = await asyncio.wait_for(stream.readline(), 60)
    if not line:
        raise RuntimeError("the client process ended early")
    return line.decode().strip()


async def paced(engine: Engine, args: argparse.Namespace) -> float:
    """Serving-process CPU seconds of ``frames`` frames published ``interval`` apart."""
    spent = 0.0
    for index in range(args.frames):
        start = time.process_time()
        await engine.publish(STREAM, GROUP, frame(index))
        await asyncio.sleep(0)  # the endpoint's share runs here and during the wait below
        spent += time.process_time() - start
        start = time.process_time()
        await asyncio.sleep(args.interval)
        spent += time.process_time() - start
    return spent


async def bursts(
    engine: Engine, args: argparse.Namespace, acks: asyncio.StreamReader | None
) -> float:
    """Serving-process CPU seconds of ``chunks`` bursts of ``chunk`` frames, each burst read
    whole (acknowledged) before the next, the wait for the ack included."""
    start = time.process_time()
    for _ in range(args.chunks):
        for index in range(args.chunk):
            await engine.publish(STREAM, GROUP, frame(index))
        if acks is not None:
            assert await read_line(acks) == "ack"
        else:
            await asyncio.sleep(0)
    return time.process_time() - start


async def serve(args: argparse.Namespace) -> dict[str, Any]:
    load = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="trb-") as directory:
        engine = open_engine(f"embedded:{directory}/engine.db")
        await engine.start()
        endpoint = LocalEndpoint(engine, path=Path(directory) / "t.sock")
        await endpoint.start()
        try:
            # Published with nobody subscribed: what the frames cost without the endpoint.
            alone = {"paced": await paced(engine, args), "burst": await bursts(engine, args, None)}
            figures = await with_client(args, engine, endpoint, alone=alone)
        finally:
            await endpoint.close()
            await engine.close()
    return {**figures, "loadavg_1m": [load, round(os.getloadavg()[0], 2)]}


async def with_client(
    args: argparse.Namespace, engine: Engine, endpoint: LocalEndpoint, *, alone: dict[str, float]
) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--client", str(endpoint.path), "--frames", str(args.frames),
        "--chunk", str(args.chunk), "--chunks", str(args.chunks), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        assert await read_line(proc.stdout) == "subscribed"
        latency = {
            "idle": await delays(engine, args, proc.stdout, busy=False),
            "busy": await delays(engine, args, proc.stdout, busy=True),
        }
        served = {"paced": await paced(engine, args)}
        read = {"paced": json.loads(await read_line(proc.stdout))}
        served["burst"] = await bursts(engine, args, proc.stdout)
        read["burst"] = json.loads(await read_line(proc.stdout))
        await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    cpu = {}
    for phase, frames in (("paced", args.frames), ("burst", args.chunk * args.chunks)):
        serving = (served[phase] - alone[phase]) / frames * 1e6
        reading = read[phase]["cpu_s"] / frames * 1e6
        cpu[phase] = {
            "frames": frames,
            "frames_per_poll": round(frames / max(read[phase]["polls"], 1), 1),
            "serving_us_per_frame": round(serving, 2),
            "client_us_per_frame": round(reading, 2),
            "total_us_per_frame": round(serving + reading, 2),
        }
    return {
        "latency": {"frames": args.frames, "interval_s": args.interval, **latency},
        "cpu": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--client", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--frames", type=int, default=2000, help="paced frames per phase")
    parser.add_argument("--interval", type=float, default=0.002, help="seconds between frames")
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.frames, args.chunk, args.chunks = 50, 100, 2
    if args.client is not None:
        asyncio.run(client(args.client, paced=args.frames, chunk=args.chunk, chunks=args.chunks))
        return
    figures = asyncio.run(serve(args))
    report = {"schema_version": SCHEMA_VERSION, "benchmark": "remote_deltas", "machine": machine()}
    print(json.dumps({**report, **figures}, indent=2))


if __name__ == "__main__":
    main()
