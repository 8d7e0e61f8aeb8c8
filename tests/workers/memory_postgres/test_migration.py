"""A memory table made by the code before its GIN index left the pending list (``fastupdate``
on, rows waiting in the list) opens with today's store: the index is switched over, the list is
flushed, and every old item is still found."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tackroom.contracts.memory import MemoryScope
from tackroom.workers.memory_postgres.store import PostgresMemoryStore

DSN = os.environ.get("TACKROOM_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
SCOPE = MemoryScope(kind="workspace", id="default")
OLD_LAYOUT = """
create schema {schema};
create table {schema}.memory (
    scope text not null, item_id text not null, text text not null,
    metadata jsonb not null, created_at double precision not null,
    updated_at double precision not null,
    tsv tsvector generated always as (to_tsvector('english'::regconfig, text)) stored,
    primary key (scope, item_id));
create index memory_tsv on {schema}.memory using gin (tsv);
create index memory_recent on {schema}.memory (scope, updated_at desc);
create table {schema}.memory_meta (key text primary key, value text not null);
insert into {schema}.memory_meta values ('schema_version', '1');
"""


@pytest.fixture
def old_table() -> Iterator[tuple[Any, str]]:
    psycopg = pytest.importorskip("psycopg", reason="memory-postgres needs tackroom[postgres]")
    try:
        admin = psycopg.connect(DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {DSN} (set TACKROOM_TEST_POSTGRES): {exc}")
    schema = f"tackroom_test_{uuid.uuid4().hex[:12]}"
    try:
        admin.execute(OLD_LAYOUT.format(schema=schema))
        yield admin, schema
    finally:
        admin.execute(f'drop schema if exists "{schema}" cascade')
        admin.close()


def test_an_index_with_a_pending_list_is_switched_over_and_its_items_found(
    old_table: tuple[Any, str],
) -> None:
    admin, schema = old_table
    for index in range(200):
        text = f"note {index} about the deploy key" if index % 2 else f"lunch plan {index}"
        admin.execute(
            f"insert into {schema}.memory values (%s, %s, %s, '{{}}', %s, %s)",
            (str(SCOPE), f"old-{index}", text, float(index), float(index)),
        )
    index_name = f"{schema}.memory_tsv"
    store = PostgresMemoryStore.open(
        DSN, schema=schema, table="memory", text_search_config="english"
    )
    try:
        [options] = admin.execute(
            "select reloptions from pg_class where oid = to_regclass(%s)", (index_name,)
        ).fetchone()
        assert options == ["fastupdate=off"]
        flushed = admin.execute("select gin_clean_pending_list(%s::regclass)", (index_name,))
        assert flushed.fetchone()[0] == 0  # nothing was left waiting
        hits = store.search(SCOPE, ["deploy", "key"], limit=50, filters={})
        assert len(hits) == 50
        assert all("deploy key" in hit.item.text for hit in hits)
        hits = store.search(SCOPE, ["lunch", "deploy", "nothing"], limit=5, filters={})
        assert len(hits) == 5
        assert store.get(SCOPE, "old-7") is not None
    finally:
        store.close()
    again = PostgresMemoryStore.open(
        DSN, schema=schema, table="memory", text_search_config="english"
    )
    again.close()
