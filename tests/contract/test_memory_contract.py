"""The memory contract suite against both shipped memory workers: ``memory`` (SQLite FTS5) and
``memory-postgres`` (PostgreSQL full-text search, on the local server; each test in a schema of
its own, dropped afterwards)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tackroom.testing.contracts import MemoryContract

POSTGRES_DSN = os.environ.get("TACKROOM_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def _postgres_or_skip() -> Any:
    psycopg = pytest.importorskip("psycopg", reason="memory-postgres needs tackroom[postgres]")
    try:
        return psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {POSTGRES_DSN} (set TACKROOM_TEST_POSTGRES): {exc}")


class TestSqliteMemoryWorker(MemoryContract):
    worker_name = "memory"


class TestPostgresMemoryWorker(MemoryContract):
    worker_name = "memory-postgres"

    @contextmanager
    def storage(self, directory: Path) -> Iterator[dict[str, Any]]:
        admin = _postgres_or_skip()
        schema = f"tackroom_test_{uuid.uuid4().hex[:12]}"
        try:
            yield {"dsn": POSTGRES_DSN, "schema": schema, "table": "memory"}
        finally:
            admin.execute(f'drop schema if exists "{schema}" cascade')
            admin.close()
