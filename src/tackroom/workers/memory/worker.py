"""The ``memory`` worker: long-term memory — ``memory::save|search|get|delete|list`` — in one
SQLite file, searched with FTS5 and ranked with BM25.

```yaml
worker_config:
  memory:
    path: .tackroom/memory.db           # relative: to the working directory; a harness home
                                        # puts it there
    default_scope: workspace:default    # the scope of a request that names none
    max_text_bytes: 16384
    max_metadata_bytes: 4096
```

``memory-postgres`` serves the same functions on PostgreSQL; both pass one contract suite
(:class:`tackroom.testing.contracts.MemoryContract`). See ``docs/workers/memory.md``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import Field

from tackroom.kit.memory import MemoryConfig, serve_memory
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.memory.store import SqliteMemoryStore

__all__ = ["DEFAULT_PATH", "WORKER", "SqliteMemoryConfig"]

DEFAULT_PATH = Path(".tackroom") / "memory.db"


class SqliteMemoryConfig(MemoryConfig):
    path: Path = Field(
        default=DEFAULT_PATH, description="the SQLite file (relative: to the working directory)"
    )


async def _start(ctx: WorkerContext[SqliteMemoryConfig]) -> None:
    path = ctx.config.path.expanduser()
    store = await asyncio.to_thread(SqliteMemoryStore.open, path)
    await serve_memory(ctx, store, ctx.config)


WORKER: WorkerSpec[SqliteMemoryConfig] = WorkerSpec(
    name="memory",
    description="Long-term memory (memory::*): SQLite full-text search (FTS5, BM25) per scope.",
    config_model=SqliteMemoryConfig,
    start=_start,
)
