"""Long-term memory benchmark: ``memory::search`` over 100,000 items, SQLite FTS5 and PostgreSQL.

    python bench/memory.py [--items N] [--queries N] [--dsn postgresql://...] [--no-postgres]

One JSON document: per backend, search p50/p99 in milliseconds through the store alone
(``store_search``) and through the bus (``bus_search``: ``engine.trigger("memory::search")`` on an
in-memory engine hosting the worker), the fill time (SQLite: and the file's size), and the
machine with its 1-minute load.
``store_search.thread_cpu_p50_ms`` is the calling thread's CPU time per search: all of SQLite's
work (it runs in that thread) whatever else loads the machine; for PostgreSQL only the client's.

Items are 12-24 words drawn from a 5,000-word vocabulary with Zipf-like frequencies (as in prose:
a few words are in most items); a query is three words drawn the same way, so most queries
match thousands of items that BM25 / ``ts_rank`` must rank. All items sit in one scope. The
PostgreSQL figures use a schema of their own on ``--dsn``, dropped afterwards. Target: search p50
at 100,000 items <= 5 ms. Measured figures, and how the stores get there: docs/workers/memory.md.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine, summarize_ms, timed

from tackroom.contracts.memory import MemoryScope
from tackroom.engine import open_engine
from tackroom.kit.memory import MemoryStore, query_terms
from tackroom.runtime import Host
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.worker import WorkerSpec
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.memory.store import SqliteMemoryStore
from tackroom.workers.memory.worker import WORKER as SQLITE_WORKER
from tackroom.workers.memory_postgres.store import PostgresMemoryStore
from tackroom.workers.memory_postgres.worker import WORKER as POSTGRES_WORKER

SCHEMA_VERSION = 1
SCOPE = MemoryScope(kind="workspace", id="default")
VOCABULARY = 5000


class Prose:
    """Pseudo-words with Zipf-like weights, seeded: the same corpus and queries every run."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = [
            "".join(self.random.choice(letters) for _ in range(self.random.randint(3, 9)))
            for _ in range(VOCABULARY)
        ]
        self.weights = [1.0 / (rank + 1) for rank in range(VOCABULARY)]

    def words_of(self, count: int) -> list[str]:
        return self.random.choices(self.words, weights=self.weights, k=count)

    def text(self) -> str:
        return " ".join(self.words_of(self.random.randint(12, 24))).capitalize() + "."


def fill(store: MemoryStore, prose: Prose, items: int) -> float:
    start = time.perf_counter()
    for index in range(items):
        store.save(SCOPE, f"item-{index}", prose.text(), "{}", time.time())
    return time.perf_counter() - start


def store_search(store: MemoryStore, queries: list[str]) -> dict[str, float]:
    samples, cpu = [], []
    for query in queries:
        start, start_cpu = time.perf_counter(), time.thread_time()
        store.search(SCOPE, query_terms(query), limit=10, filters={})
        cpu.append(time.thread_time() - start_cpu)
        samples.append(time.perf_counter() - start)
    thread = summarize_ms(cpu)
    return {**summarize_ms(samples), "thread_cpu_p50_ms": thread["p50_ms"]}


async def bus_search(
    worker: WorkerSpec[Any], config: dict[str, Any], queries: list[str]
) -> dict[str, float]:
    harness = HarnessConfig.defaults().model_copy(update={"worker_config": {worker.name: config}})
    async with Host(engine=open_engine(MEMORY_URL), workers=[worker], config=harness) as host:
        engine = host.engine

        async def search(query: str) -> None:
            await engine.trigger("memory::search", {"query": query})

        samples = [await timed(functools.partial(search, query)) for query in queries]
    return summarize_ms(samples)


def store_mb(directory: Path) -> float:
    """The SQLite store's size on disk: the file, its WAL and shared memory."""
    return round(sum(f.stat().st_size for f in directory.glob("memory.db*")) / 2**20, 1)


@contextmanager
def postgres_schema(dsn: str) -> Iterator[str]:
    import psycopg

    schema = f"tackroom_bench_{uuid.uuid4().hex[:10]}"
    try:
        yield schema
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'drop schema if exists "{schema}" cascade')


async def measure(
    name: str,
    open_store: Callable[[], MemoryStore],
    worker: WorkerSpec[Any],
    config: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, Any]:
    prose = Prose(seed=7)
    store = open_store()
    try:
        fill_s = fill(store, prose, args.items)
        queries = [" ".join(prose.words_of(3)) for _ in range(args.queries)]
        direct = store_search(store, queries)
    finally:
        store.close()
    through_bus = await bus_search(worker, config, queries)
    return {
        "backend": name,
        "fill_s": round(fill_s, 1),
        "store_search": direct,
        "bus_search": through_bus,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    load_before = machine()["loadavg_1m"]
    results = []
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "memory.db"
        results.append(
            await measure(
                "sqlite-fts5",
                lambda: SqliteMemoryStore.open(path),
                SQLITE_WORKER,
                {"path": str(path)},
                args,
            )
        )
        results[-1]["store_mb"] = store_mb(Path(directory))
    if not args.no_postgres:
        with postgres_schema(args.dsn) as schema:
            results.append(
                await measure(
                    "postgres-fts",
                    lambda: PostgresMemoryStore.open(
                        args.dsn, schema=schema, table="memory", text_search_config="english"
                    ),
                    POSTGRES_WORKER,
                    {"dsn": args.dsn, "schema": schema, "table": "memory"},
                    args,
                )
            )
    report = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "memory",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "items": args.items,
        "queries": args.queries,
        "target_p50_ms": 5.0,
        "results": results,
        "machine": {**machine(), "loadavg_1m_before": load_before},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
