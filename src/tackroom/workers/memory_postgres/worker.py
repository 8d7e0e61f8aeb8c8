"""The ``memory-postgres`` worker: the ``memory`` worker's functions
(``memory::save|search|get|delete|list``) on PostgreSQL full-text search — a ``tsvector`` column
under a GIN index, ranked with ``ts_rank``. Needs the ``postgres`` extra (``psycopg``).

```yaml
workers: [memory-postgres]
worker_config:
  memory-postgres:
    dsn: postgresql://127.0.0.1:5432/tackroom   # libpq form; a password belongs in PGPASSWORD
                                                # or ~/.pgpass, not here
    schema: public
    table: tackroom_memory                      # created (with <table>_meta) on first start
    text_search_config: english                 # the PostgreSQL text search configuration
    default_scope: workspace:default
    max_text_bytes: 16384
```
"""

from __future__ import annotations

import asyncio

from pydantic import Field

from tackroom.kit.memory import MemoryConfig, serve_memory
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.memory_postgres.store import PostgresMemoryStore

__all__ = ["WORKER", "PostgresMemoryConfig"]

_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"


class PostgresMemoryConfig(MemoryConfig):
    dsn: str = Field(default="postgresql:///tackroom", description="libpq connection string or URL")
    schema_name: str = Field(default="public", alias="schema", pattern=_NAME)
    table: str = Field(default="tackroom_memory", pattern=_NAME)
    text_search_config: str = Field(default="english", pattern=_NAME)


async def _start(ctx: WorkerContext[PostgresMemoryConfig]) -> None:
    config = ctx.config
    store = await asyncio.to_thread(
        PostgresMemoryStore.open,
        config.dsn,
        schema=config.schema_name,
        table=config.table,
        text_search_config=config.text_search_config,
    )
    await serve_memory(ctx, store, config)


WORKER: WorkerSpec[PostgresMemoryConfig] = WorkerSpec(
    name="memory-postgres",
    description="Long-term memory (memory::*) on PostgreSQL full-text search (tsvector, ts_rank).",
    config_model=PostgresMemoryConfig,
    start=_start,
)
