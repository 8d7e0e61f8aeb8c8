"""Context assembly benchmark: the cost of building one model call's context as a session grows.

    python bench/context.py [--sizes 10,1000,10000] [--calls 200] [--memory-items N | --no-memory]

One JSON document. For each session size N (entries on the active path) the orchestrator's
``ContextAssembler.assemble`` runs ``--calls`` times on an embedded engine hosting the
``sessions`` worker, one new entry appended before each call — a turn's worth of new history,
read incrementally — and the p50/p99 of the assembly are reported, in two shapes:

- ``whole``: the window holds everything (every entry is sent);
- ``compacted``: the session has a compaction entry near its end (what a long session looks like
  after compaction: a summary and the newest entries are sent).

Target: <= 1 ms at 10,000 entries, flat in N (no pass over the whole history per call). The
memory search figure (p50 at 100,000 items, target <= 5 ms) comes from ``bench/memory.py`` run as
a child on the embedded default, the ``memory`` worker's SQLite store (``--no-postgres``; see that
benchmark for PostgreSQL): ``search`` is the store alone (the target's figure), ``bus_search`` the
same queries through ``memory::search`` on the bus.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine, summarize_ms

from tackroom.contracts.context import (
    COMPACTION_TYPE,
    CompactionDetails,
    ContextSettings,
)
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    TextBlock,
    UserMessage,
)
from tackroom.contracts.sessions import (
    APPEND_BATCH,
    ENSURE,
    AppendBatchRequest,
    BatchItem,
    EnsureRequest,
)
from tackroom.engine import open_engine
from tackroom.runtime import Host, load_worker
from tackroom.workers.orchestrator.context import ContextAssembler
from tackroom.workers.orchestrator.models import ModelInfoCache
from tackroom.workers.orchestrator.record import TurnRecord
from tackroom.workers.orchestrator.transcript import SessionsClient

SCHEMA_VERSION = 1
BATCH = 200


def entry(i: int) -> AgentMessage:
    if i % 2 == 0:
        return UserMessage.text(f"Question {i}: what about item {i}?")
    return AssistantMessage(content=[TextBlock(text=f"Answer {i}: item {i} is fine. " * 3)])


def compaction(replaced: list[str], first_kept: str) -> CustomMessage:
    details = CompactionDetails(
        replaces=replaced,
        first_kept_entry_id=first_kept,
        provider="bench",
        model="bench",
        tokens_before=10_000,
        tokens_after=100,
    )
    return CustomMessage(
        custom_type=COMPACTION_TYPE,
        content=[TextBlock(text="A summary of everything before.")],
        details=details.model_dump(mode="json"),
    )


async def fill(host: Host, session: str, size: int, *, compacted: bool) -> None:
    bus = host.engine
    await ENSURE.call(bus, EnsureRequest(session_id=session))
    items = [BatchItem(entry_id=f"e{i}", message=entry(i)) for i in range(size)]
    if compacted and size > 20:
        kept = size - 10
        summary = compaction([f"e{i}" for i in range(min(kept, 50))], f"e{kept}")
        items.append(BatchItem(entry_id="compaction-1", message=summary))
    for start in range(0, len(items), BATCH):
        await APPEND_BATCH.call(
            bus, AppendBatchRequest(session_id=session, entries=items[start : start + BATCH])
        )


async def measure(size: int, calls: int, *, compacted: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        engine = open_engine(f"embedded:{Path(directory) / 'engine.db'}")
        workers = [load_worker("engine"), load_worker("sessions")]
        async with Host(engine=engine, workers=workers) as host:
            session = f"bench-{size}"
            await fill(host, session, size, compacted=compacted)
            sessions = SessionsClient(host.engine)
            assembler = ContextAssembler(
                host.engine,
                sessions=sessions,
                models=ModelInfoCache(host.engine),
                defaults=ContextSettings(),
                default_result_limit=16_000,
                compaction_function=None,
            )
            window = 10_000_000 if not compacted else 200_000
            record = TurnRecord(
                session_id=session,
                run_id="run-bench",
                provider="bench",
                model="bench",
                system_prompt="You are a benchmark.",
                context=ContextSettings(context_window_limit=window),
            )
            first = await assembler.assemble(record)  # the first read: the whole path
            assert first.overflow is None, first.overflow
            samples: list[float] = []
            sent = 0
            for i in range(calls):
                new = entry(size + i)
                await sessions.append(session, [(f"n{i}", new)])
                start = time.perf_counter()
                assembled = await assembler.assemble(record)
                samples.append(time.perf_counter() - start)
                sent = len(assembled.messages)
    return {"entries": size, "messages_sent": sent, **summarize_ms(samples)}


def memory_search(items: int, queries: int) -> dict[str, Any]:
    """``bench/memory.py`` on SQLite, as a child: its search figures at ``items``."""
    bench = Path(__file__).with_name("memory.py")
    command = [sys.executable, str(bench), "--items", str(items), "--queries", str(queries)]
    out = subprocess.run([*command, "--no-postgres"], check=True, capture_output=True, text=True)
    report = json.loads(out.stdout)
    [sqlite] = [r for r in report["results"] if r["backend"] == "sqlite-fts5"]
    return {
        "items": items,
        "backend": "sqlite-fts5",
        "search": sqlite["store_search"],
        "bus_search": sqlite["bus_search"],
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--memory-items", type=int, default=100_000)
    parser.add_argument("--memory-queries", type=int, default=500)
    parser.add_argument("--no-memory", action="store_true")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "context",
        "machine": machine(),
        "target": {"assembly_p50_ms_at_10000": 1.0, "memory_search_p50_ms_at_100000": 5.0},
        "assembly": {
            "whole": [await measure(size, args.calls, compacted=False) for size in sizes],
            "compacted": [await measure(size, args.calls, compacted=True) for size in sizes],
        },
    }
    if not args.no_memory:
        report["memory_search"] = memory_search(args.memory_items, args.memory_queries)
    report["machine"]["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
