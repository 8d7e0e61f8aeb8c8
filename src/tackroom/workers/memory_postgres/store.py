"""Memory items in a PostgreSQL table, found by full-text search (``tsvector``, ``ts_rank``).

Synchronous (psycopg 3): the worker calls it through ``asyncio.to_thread``, one call at a time.
The table holds one row per scope and id, metadata as ``jsonb`` and a stored generated
``tsvector`` under a GIN index; ``<table>_meta`` holds ``schema_version``. A query's words reach
PostgreSQL as ``plainto_tsquery`` input (all of them) and then, if needed, as
``websearch_to_tsquery`` input joined by ``or`` (any of them) — neither parser raises on user
text — and every identifier is quoted by ``psycopg.sql``. The any-word stage ranks the rows
with most of the words first and stops as soon as no other row can pass them (``coordination``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tackroom.contracts.memory import MemoryHit, MemoryItem, MemoryScope, ScalarValue
from tackroom.extras import import_extra
from tackroom.kit.memory import all_words_first, falling_hits
from tackroom.workers.memory_postgres.coordination import disjunction, levels

__all__ = ["SCHEMA_VERSION", "PostgresMemoryStore"]

SCHEMA_VERSION = 1
_COLUMNS = "scope, item_id, text, metadata, created_at, updated_at"


def _item(row: tuple[Any, ...]) -> MemoryItem:
    scope, item_id, text, metadata, created_at, updated_at = row[:6]
    kind, _, scope_id = scope.partition(":")
    return MemoryItem(
        id=item_id,
        scope=MemoryScope.model_validate({"kind": kind, "id": scope_id}),
        text=text,
        metadata=metadata,
        created_at=created_at,
        updated_at=updated_at,
    )


class PostgresMemoryStore:
    def __init__(self, conn: Any, *, schema: str, table: str, text_search_config: str) -> None:
        sql = import_extra("psycopg.sql", needed_by="the memory-postgres worker")
        self._conn = conn
        self._text_search_config = text_search_config
        self._sql = sql
        self._table = sql.Identifier(schema, table)
        self._meta = sql.Identifier(schema, f"{table}_meta")

    @classmethod
    def open(
        cls, dsn: str, *, schema: str, table: str, text_search_config: str
    ) -> PostgresMemoryStore:
        """Connect to ``dsn`` and create the schema, table and index as needed."""
        psycopg = import_extra("psycopg", needed_by="the memory-postgres worker")
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        store = cls(conn, schema=schema, table=table, text_search_config=text_search_config)
        try:
            store._migrate(schema, table, text_search_config)
        except BaseException:
            conn.close()
            raise
        return store

    def _migrate(self, schema: str, table: str, config: str) -> None:
        sql = self._sql
        names = {
            "schema": sql.Identifier(schema),
            "table": self._table,
            "meta": self._meta,
            "index": sql.Identifier(f"{table}_tsv"),
            "recent": sql.Identifier(f"{table}_recent"),
            "config": sql.Literal(config),
        }
        with self._conn.transaction():
            self._conn.execute(sql.SQL("create schema if not exists {schema}").format(**names))
            self._conn.execute(
                sql.SQL(
                    "create table if not exists {table} ("
                    " scope text not null, item_id text not null, text text not null,"
                    " metadata jsonb not null, created_at double precision not null,"
                    " updated_at double precision not null,"
                    " tsv tsvector generated always as"
                    " (to_tsvector({config}::regconfig, text)) stored,"
                    " primary key (scope, item_id))"
                ).format(**names)
            )
            self._conn.execute(
                sql.SQL(
                    "create index if not exists {index} on {table} using gin (tsv)"
                    " with (fastupdate = off)"
                ).format(**names)
            )
            self._without_pending_list(sql.Identifier(schema, f"{table}_tsv"))
            self._conn.execute(
                sql.SQL(
                    "create index if not exists {recent} on {table} (scope, updated_at desc)"
                ).format(**names)
            )
            self._conn.execute(
                sql.SQL(
                    "create table if not exists {meta} (key text primary key, value text not null)"
                ).format(**names)
            )
            self._conn.execute(
                sql.SQL(
                    "insert into {meta} values ('schema_version', %s) on conflict do nothing"
                ).format(**names),
                (str(SCHEMA_VERSION),),
            )
            found = self._conn.execute(
                sql.SQL("select value from {meta} where key = 'schema_version'").format(**names)
            ).fetchone()
        if int(found[0]) > SCHEMA_VERSION:
            raise RuntimeError(
                f"memory table {schema}.{table} has schema {found[0]}; this tackroom reads up to"
                f" {SCHEMA_VERSION}: upgrade tackroom"
            )

    def _without_pending_list(self, index: Any) -> None:
        """GIN's pending list (``fastupdate``, on by default) makes every search scan the rows
        saved since the last vacuum one by one: 100,000 fresh rows tripled search time. Saves
        go straight into the index instead; an index made by earlier code (with the default)
        is switched over, and its pending list flushed, once."""
        name = index.as_string(self._conn)
        found = self._conn.execute(
            "select 'fastupdate=off' = any(coalesce(reloptions, '{}'))"
            " from pg_class where oid = to_regclass(%s)",
            (name,),
        ).fetchone()
        if found[0]:
            return
        self._conn.execute(self._sql.SQL("alter index {} set (fastupdate = off)").format(index))
        self._conn.execute("select gin_clean_pending_list(%s::regclass)", (name,))

    def _query(self, template: str) -> Any:
        return self._sql.SQL(template).format(table=self._table)

    def save(
        self, scope: MemoryScope, item_id: str, text: str, metadata: str, now: float
    ) -> tuple[MemoryItem, bool]:
        row = self._conn.execute(
            self._query(
                "insert into {table} (scope, item_id, text, metadata, created_at, updated_at)"
                " values (%s, %s, %s, %s::jsonb, %s, %s) on conflict (scope, item_id) do update"
                " set text = excluded.text, metadata = excluded.metadata,"
                " updated_at = excluded.updated_at"
                f" returning {_COLUMNS}, (xmax = 0) as inserted"
            ),
            (str(scope), item_id, text, metadata, now, now),
        ).fetchone()
        return _item(row), bool(row[6])

    def get(self, scope: MemoryScope, item_id: str) -> MemoryItem | None:
        row = self._conn.execute(
            self._query(f"select {_COLUMNS} from {{table}} where scope = %s and item_id = %s"),
            (str(scope), item_id),
        ).fetchone()
        return None if row is None else _item(row)

    def delete(self, scope: MemoryScope, item_id: str) -> bool:
        gone = self._conn.execute(
            self._query("delete from {table} where scope = %s and item_id = %s"),
            (str(scope), item_id),
        )
        return bool(gone.rowcount > 0)

    def list_items(
        self, scope: MemoryScope, *, limit: int, offset: int, filters: Mapping[str, ScalarValue]
    ) -> tuple[list[MemoryItem], bool]:
        rows = self._conn.execute(
            self._query(
                f"select {_COLUMNS} from {{table}} where scope = %s and metadata @> %s::jsonb"
                " order by updated_at desc, item_id limit %s offset %s"
            ),
            (str(scope), json.dumps(dict(filters)), limit + 1, offset),
        ).fetchall()
        return [_item(row) for row in rows[:limit]], len(rows) > limit

    def search(
        self,
        scope: MemoryScope,
        terms: list[str],
        *,
        limit: int,
        filters: Mapping[str, ScalarValue],
    ) -> list[MemoryHit]:
        """Items with all of ``terms`` by ``ts_rank``; when fewer than ``limit``, then items with
        any of them (again by ``ts_rank``), without repeats."""

        def ranked(every: bool) -> list[tuple[Any, ...]]:
            if every:
                return self._ranked("plainto_tsquery", " ".join(terms), scope, limit, filters)
            return self._ranked_any(terms, scope, limit, filters)

        rows = all_words_first(terms, limit, ranked, key=lambda row: row[1])
        return falling_hits((_item(row), float(row[6])) for row in rows)

    def _ranked_any(
        self, terms: list[str], scope: MemoryScope, limit: int, filters: Mapping[str, ScalarValue]
    ) -> list[tuple[Any, ...]]:
        """The best ``limit`` items with any of ``terms``, exactly as ranking them all, without
        ranking every match (:mod:`.coordination`): first among the rows with most of the
        words, as long as their ``limit``-th beats every row with fewer."""
        words = " or ".join(terms)
        query = self._conn.execute(
            "select websearch_to_tsquery(%s::regconfig, %s)::text",
            (self._text_search_config, words),
        ).fetchone()[0]
        for matching, bound in levels(disjunction(query) or []):
            rows = self._ranked_by(matching, query, scope, limit, filters)
            if len(rows) >= limit and rows[limit - 1][6] >= bound:
                return rows
        return self._ranked("websearch_to_tsquery", words, scope, limit, filters)

    def _ranked(
        self,
        parser: str,
        query: str,
        scope: MemoryScope,
        limit: int,
        filters: Mapping[str, ScalarValue],
    ) -> list[tuple[Any, ...]]:
        rows = self._conn.execute(
            self._query(
                f"select {_COLUMNS}, ts_rank(tsv, q) as rank"
                f" from {{table}}, {parser}(%s::regconfig, %s) as q"
                " where scope = %s and tsv @@ q and metadata @> %s::jsonb"
                " order by rank desc, updated_at desc limit %s"
            ),
            (self._text_search_config, query, str(scope), json.dumps(dict(filters)), limit),
        ).fetchall()
        return list(rows)

    def _ranked_by(
        self,
        matching: str,
        ranking: str,
        scope: MemoryScope,
        limit: int,
        filters: Mapping[str, ScalarValue],
    ) -> list[tuple[Any, ...]]:
        """The rows matching the ``tsquery`` text ``matching``, ranked by ``ranking``."""
        rows = self._conn.execute(
            self._query(
                f"select {_COLUMNS}, ts_rank(tsv, %s::tsquery) as rank from {{table}}"
                " where scope = %s and tsv @@ %s::tsquery and metadata @> %s::jsonb"
                " order by rank desc, updated_at desc limit %s"
            ),
            (ranking, str(scope), matching, json.dumps(dict(filters)), limit),
        ).fetchall()
        return list(rows)

    def close(self) -> None:
        self._conn.close()
