"""Engine latency benchmark: prints one JSON document with p50/p99 per figure and the machine.

    python bench/engine.py [--engine URL] [--samples N] [--only SECTION]...

Sections (``--only`` takes these names; both run by default):

``primitives``: figures (microseconds), each with tracing off and on:
- ``trigger``: round trip of a trivial function;
- ``enqueue_to_handler``: from calling ``enqueue`` to the handler starting (durable);
- ``cas_write``: ``set_state`` with ``expected_revision``;
- ``concurrent_cas_writes``: 100 tasks each making one such write at once, per write (the
  embedded engine writes them in one shared transaction: group commit);
- ``append_to_subscriber``: from calling ``append`` to a live subscriber receiving the record.

``cross_language``: ``trigger`` from Python over NATS to an echo served by a TypeScript worker
(``ts``) and by a Python worker (``py``), each in a process of its own, interleaved in rounds:
p50/p90 wall time, the calling process's CPU per call, and the ratio ts/py (target ≤ 1.3). On
``--engine nats://…`` if given, else on a nats-server of its own; skipped (with a note) without
node or a built sdk/typescript (bench/crosslang.py says more).

Timing is wall clock on a shared machine: compare medians and ratios from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from _common import machine, p50_p99
from crosslang import bench_cross_language
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tackroom.engine import Engine, open_engine

Sample = Callable[[], Awaitable[float]]


def summarize(samples: list[float]) -> dict[str, float]:
    p50, p99 = p50_p99(samples)
    return {
        "p50_us": round(p50 * 1e6, 1),
        "p99_us": round(p99 * 1e6, 1),
        "samples": len(samples),
    }


async def measure(sample: Sample, count: int, *, warmup: int = 200) -> dict[str, float]:
    for _ in range(warmup):
        await sample()
    return summarize([await sample() for _ in range(count)])


async def bench_trigger(engine: Engine, count: int) -> dict[str, float]:
    async def echo(payload: Any) -> Any:
        return payload

    await engine.register_function("bench::echo", echo, worker="bench")
    payload = {"session_id": "s-bench", "n": 1}

    async def sample() -> float:
        start = time.perf_counter()
        await engine.trigger("bench::echo", payload)
        return time.perf_counter() - start

    return await measure(sample, count)


async def bench_enqueue(engine: Engine, count: int) -> dict[str, float]:
    arrived: asyncio.Queue[float] = asyncio.Queue()

    async def handler(payload: Any) -> None:
        arrived.put_nowait(time.perf_counter())

    await engine.register_function("bench::sink", handler, worker="bench")

    async def sample() -> float:
        start = time.perf_counter()
        await engine.enqueue("bench::sink", {"n": 1}, queue="bench")
        return (await arrived.get()) - start

    return await measure(sample, count)


async def bench_cas(engine: Engine, count: int) -> dict[str, float]:
    entry = await engine.set_state("bench", "counter", {"n": 0})
    revision = entry.revision

    async def sample() -> float:
        nonlocal revision
        start = time.perf_counter()
        entry = await engine.set_state(
            "bench", "counter", {"n": revision}, expected_revision=revision
        )
        elapsed = time.perf_counter() - start
        revision = entry.revision
        return elapsed

    return await measure(sample, count)


WRITERS = 100


async def bench_concurrent_cas(engine: Engine, count: int) -> dict[str, float]:
    revisions = [(await engine.set_state("bench", f"w{i}", 0)).revision for i in range(WRITERS)]

    async def write(index: int) -> None:
        entry = await engine.set_state(
            "bench", f"w{index}", revisions[index], expected_revision=revisions[index]
        )
        revisions[index] = entry.revision

    async def sample() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(write(i) for i in range(WRITERS)))
        return (time.perf_counter() - start) / WRITERS

    return {**await measure(sample, max(20, count // WRITERS), warmup=5), "writers": WRITERS}


async def bench_stream(engine: Engine, count: int) -> dict[str, float]:
    # A group of this run's own: an engine given with --engine may hold an earlier run's records.
    group = f"g-{time.time_ns()}"
    subscription = await engine.subscribe("bench-events", group)
    arrived: asyncio.Queue[float] = asyncio.Queue()

    async def reader() -> None:
        async for _record in subscription:
            arrived.put_nowait(time.perf_counter())

    task = asyncio.create_task(reader())
    try:

        async def sample() -> float:
            start = time.perf_counter()
            await engine.append("bench-events", group, {"delta": "token"})
            return (await arrived.get()) - start

        return await measure(sample, count)
    finally:
        await subscription.aclose()
        await asyncio.gather(task, return_exceptions=True)


async def run_suite(url: str, count: int, *, tracing: bool) -> dict[str, Any]:
    provider: TracerProvider | None = None
    if tracing:
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    engine = open_engine(url, tracer_provider=provider)
    await engine.start()
    try:
        return {
            "trigger": await bench_trigger(engine, count),
            "enqueue_to_handler": await bench_enqueue(engine, count),
            "cas_write": await bench_cas(engine, count),
            "concurrent_cas_writes": await bench_concurrent_cas(engine, count),
            "append_to_subscriber": await bench_stream(engine, count),
        }
    finally:
        await engine.close()
        if provider is not None:
            provider.shutdown()


SECTIONS = ("primitives", "cross_language")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default=None, help="engine URL (default: a temp embedded file)")
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument(
        "--only",
        action="append",
        choices=SECTIONS,
        default=[],
        metavar="SECTION",
        help=f"run only this section (repeatable): {', '.join(SECTIONS)}",
    )
    args = parser.parse_args()
    sections = args.only or SECTIONS
    results: dict[str, Any] = {}
    if "primitives" in sections:
        with tempfile.TemporaryDirectory(prefix="tackroom-bench-") as tmp:
            for tracing in (False, True):
                url = args.engine or f"embedded:{tmp}/engine-{'on' if tracing else 'off'}.db"
                results["tracing_on" if tracing else "tracing_off"] = await run_suite(
                    url, args.samples, tracing=tracing
                )
    if "cross_language" in sections:
        results["cross_language"] = await bench_cross_language(args.engine, args.samples)
    report = {
        "schema_version": 1,
        "benchmark": "engine",
        "engine": args.engine or "embedded:<tempfile>",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "results": results,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
