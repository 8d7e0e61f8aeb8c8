"""Memory items in one SQLite file, found by full-text search ranked with FTS5's BM25.

Synchronous: the worker calls it through ``asyncio.to_thread``, one call at a time. Tables:
``meta`` (``schema_version``), ``items`` (one row per scope and id; metadata as JSON text),
``items_fts``, an external-content FTS5 index over ``items.text`` kept in step by triggers
(Porter stemming over ``unicode61``, diacritics folded), and the impact index (:mod:`.impact`),
kept in step by ``save`` and ``delete`` in the same transaction.

A search whose words are each one FTS5 token reads the impact index (:mod:`.topk`). Any other
(a word like ``foo_bar`` is a two-token phrase) is ranked by FTS5 itself: all words, then — when
that is not enough — the rarer words first, while BM25's bound shows no other row can enter the
top (:mod:`.bm25`). Both give the same hits with the same scores.

Schema 2 added the impact index; a schema 1 store is indexed when it is first opened.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tackroom.contracts.memory import MemoryHit, MemoryItem, MemoryScope, ScalarValue
from tackroom.kit.memory import all_words_first, falling_hits
from tackroom.kit.sqlitefile import use_wal
from tackroom.workers.memory.bm25 import splits
from tackroom.workers.memory.impact import INDEX_SCHEMA, TOKENIZE, ImpactIndex
from tackroom.workers.memory.scoring import match_expression
from tackroom.workers.memory.topk import top_k

__all__ = ["SCHEMA_VERSION", "SqliteMemoryStore", "match_expression"]

SCHEMA_VERSION = 2
"""1: items and FTS5. 2: and the impact index."""

_META = "create table if not exists meta (key text primary key, value text not null)"
_SCHEMA = f"""
create table if not exists items (
    rowid integer primary key,
    scope text not null,
    item_id text not null,
    text text not null,
    metadata text not null,
    created_at real not null,
    updated_at real not null,
    unique (scope, item_id)
);
create index if not exists items_by_update on items (scope, updated_at desc);
create virtual table if not exists items_fts using fts5(
    text, content='items', content_rowid='rowid',
    tokenize='{TOKENIZE}'
);
create trigger if not exists items_ai after insert on items begin
    insert into items_fts (rowid, text) values (new.rowid, new.text);
end;
create trigger if not exists items_ad after delete on items begin
    insert into items_fts (items_fts, rowid, text) values ('delete', old.rowid, old.text);
end;
create trigger if not exists items_au after update of text on items begin
    insert into items_fts (items_fts, rowid, text) values ('delete', old.rowid, old.text);
    insert into items_fts (rowid, text) values (new.rowid, new.text);
end;
"""
_MMAP_BYTES = 256 << 20
"""Read the file through a memory map (up to this much): a search reads pages all over the
index, and a read call and a copy per page cost more than the search's own work."""
_OVER_FETCH = 4
_WIDEN = 8
_COUNT_UP_TO = 8192
"""A word's rows are counted up to this many: exact for rarer words, a floor for common ones."""
_COLUMNS = "i.scope, i.item_id, i.text, i.metadata, i.created_at, i.updated_at"
_BY_ROWID = (
    f"select i.rowid, {_COLUMNS} from items i"
    " where i.rowid in (select value from json_each(?)) and +i.scope = ?"
)
"""Items by rowid (a JSON list), of one scope. ``+i.scope``: look them up by rowid; on the
scope index SQLite would walk every item of the scope (100,000 for 40 rows)."""


def _filter_sql(filters: Mapping[str, ScalarValue]) -> tuple[str, list[Any]]:
    # Keys are checked names (kit.memory), so they can sit inside the quoted JSON path.
    sql = "".join(f" and json_extract(i.metadata, '$.\"{key}\"') = ?" for key in filters)
    return sql, list(filters.values())


def _schema_version(db: sqlite3.Connection) -> int | None:
    found = db.execute("select value from meta where key = 'schema_version'").fetchone()
    return None if found is None else int(found[0])


def _item(row: sqlite3.Row) -> MemoryItem:
    kind, _, scope_id = row["scope"].partition(":")
    return MemoryItem(
        id=row["item_id"],
        scope=MemoryScope.model_validate({"kind": kind, "id": scope_id}),
        text=row["text"],
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class SqliteMemoryStore:
    def __init__(self, db: sqlite3.Connection, *, count_up_to: int = _COUNT_UP_TO) -> None:
        self._db = db
        self._count_up_to = count_up_to
        self._index = ImpactIndex(db)

    @classmethod
    def open(cls, path: Path, *, count_up_to: int = _COUNT_UP_TO) -> SqliteMemoryStore:
        """The store in ``path`` (``:memory:`` for none), created and migrated as needed."""
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            use_wal(db)
            db.execute("pragma busy_timeout = 5000")
            db.execute("pragma synchronous = normal")  # WAL: durable at checkpoints, never torn
            db.execute(f"pragma mmap_size = {_MMAP_BYTES}")
            db.execute(_META)
            found = _schema_version(db)
            if found is not None and found > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{path} has memory schema {found}; this tackroom reads up to"
                    f" {SCHEMA_VERSION}: upgrade tackroom"
                )
            db.executescript(_SCHEMA + INDEX_SCHEMA)
            store = cls(db, count_up_to=count_up_to)
            store._migrate()
        except BaseException:
            db.close()
            raise
        return store

    def _migrate(self) -> None:
        """Schema 1 (or none) to 2: index every item. Then, cheaply, that the index counts every
        item (else it is built again), and that its impacts suit today's average length."""
        with self._db:
            self._db.execute("begin immediate")
            if _schema_version(self._db) != SCHEMA_VERSION:
                self._index.rebuild()
                self._db.execute(
                    "insert into meta values ('schema_version', ?) on conflict (key)"
                    " do update set value = excluded.value",
                    (str(SCHEMA_VERSION),),
                )
            elif not self._index.in_step():
                self._index.rebuild()
            elif self._index.stats().drifted:
                self._index.rekey()

    def save(
        self, scope: MemoryScope, item_id: str, text: str, metadata: str, now: float
    ) -> tuple[MemoryItem, bool]:
        key = str(scope)
        with self._db:
            self._db.execute("begin immediate")
            old = self._db.execute(
                "select created_at, text from items where scope = ? and item_id = ?",
                (key, item_id),
            ).fetchone()
            rowid = self._db.execute(
                "insert into items (scope, item_id, text, metadata, created_at, updated_at)"
                " values (?, ?, ?, ?, ?, ?) on conflict (scope, item_id) do update set"
                " text = excluded.text, metadata = excluded.metadata,"
                " updated_at = excluded.updated_at returning rowid",
                (key, item_id, text, metadata, now, now),
            ).fetchone()[0]
            if old is None or old["text"] != text:
                if old is not None:
                    self._index.remove(rowid, key)
                self._index.add(rowid, key, text)
        created_at = now if old is None else old["created_at"]
        item = MemoryItem(
            id=item_id,
            scope=scope,
            text=text,
            metadata=json.loads(metadata),
            created_at=created_at,
            updated_at=now,
        )
        return item, old is None

    def get(self, scope: MemoryScope, item_id: str) -> MemoryItem | None:
        row = self._db.execute(
            f"select {_COLUMNS} from items i where i.scope = ? and i.item_id = ?",
            (str(scope), item_id),
        ).fetchone()
        return None if row is None else _item(row)

    def delete(self, scope: MemoryScope, item_id: str) -> bool:
        with self._db:
            self._db.execute("begin immediate")
            gone = self._db.execute(
                "delete from items where scope = ? and item_id = ? returning rowid",
                (str(scope), item_id),
            ).fetchall()
            for (rowid,) in gone:
                self._index.remove(rowid, str(scope))
        return bool(gone)

    def list_items(
        self, scope: MemoryScope, *, limit: int, offset: int, filters: Mapping[str, ScalarValue]
    ) -> tuple[list[MemoryItem], bool]:
        where, values = _filter_sql(filters)
        rows = self._db.execute(
            f"select {_COLUMNS} from items i where i.scope = ?{where}"
            " order by i.updated_at desc, i.rowid desc limit ? offset ?",
            (str(scope), *values, limit + 1, offset),
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
        """Items with all of ``terms`` by BM25; when fewer than ``limit``, then items with any
        of them (again by BM25), without repeats."""
        phrases = self._index.phrases(terms)
        if phrases is None:
            return self._search_fts(scope, terms, limit=limit, filters=filters)
        return self._search_impacts(scope, terms, phrases, limit=limit, filters=filters)

    def _search_fts(
        self,
        scope: MemoryScope,
        terms: list[str],
        *,
        limit: int,
        filters: Mapping[str, ScalarValue],
    ) -> list[MemoryHit]:
        """The same, ranked by FTS5's ``bm25()``: for words that are not one token each."""

        def ranked(every: bool) -> list[tuple[sqlite3.Row, float]]:
            if every:
                return self._ranked(scope, match_expression(terms, every=True), limit, filters)
            return self._ranked_any(scope, terms, limit, filters)

        rows = all_words_first(terms, limit, ranked, key=lambda ranked: ranked[0]["rowid"])
        # FTS5's bm25() is negative, lower is better.
        return falling_hits((_item(row), -rank) for row, rank in rows)

    def _search_impacts(
        self,
        scope: MemoryScope,
        terms: list[str],
        phrases: list[str],
        *,
        limit: int,
        filters: Mapping[str, ScalarValue],
    ) -> list[MemoryHit]:
        self._db.execute("begin")  # one snapshot for the statistics, the lists and the items
        try:
            stats = self._index.stats()
            ranked = top_k(
                self._db,
                stats,
                terms,
                phrases,
                scope=str(scope),
                scope_id=self._index.scope_id(str(scope)),
                limit=limit,
                filters=filters,
            )
            docs = json.dumps([doc for *_, doc in ranked])
            rows = {row["rowid"]: row for row in self._db.execute(_BY_ROWID, (docs, str(scope)))}
        finally:
            self._db.execute("commit")
        return falling_hits((_item(rows[doc]), score) for _, score, _, doc in ranked)

    def _ranked_any(
        self, scope: MemoryScope, terms: list[str], limit: int, filters: Mapping[str, ScalarValue]
    ) -> list[tuple[sqlite3.Row, float]]:
        """The best ``limit`` items with any of ``terms``, exactly as ``_ranked`` on the OR of
        them, without ranking every match (:mod:`.bm25`). For a split into rarer and commoner
        words: the best rows with a rarer word; if the ``limit``-th of them beats what a row
        with only commoner words can score, they are the answer. Else the next split, and last
        the OR of all words, ranked whole."""
        rows = self._db.execute("select coalesce(max(rowid), 0) from items").fetchone()[0]
        for rare, common, bound in splits(self._counts(terms), rows):
            best = self._with_a_rare_word(scope, rare, common, limit, filters)
            if len(best) >= limit and -best[limit - 1][1] >= bound:
                return best[:limit]
        return self._ranked(scope, match_expression(terms), limit, filters)

    def _with_a_rare_word(
        self,
        scope: MemoryScope,
        rare: list[str],
        common: list[str],
        limit: int,
        filters: Mapping[str, ScalarValue],
    ) -> list[tuple[sqlite3.Row, float]]:
        """The best rows with a ``rare`` word by their score for the OR of all words, from two
        rankings that each hold every phrase once: ``rare AND common`` (``both``: exact) and
        ``rare`` alone (exact for a row without a common word). A row with a common word that
        is not among ``both``'s ``limit`` best scores no more than their last in full, and
        less in ``rare`` alone: it stays behind them either way."""
        either = match_expression(rare)
        both = self._ranked(scope, f"({either}) AND ({match_expression(common)})", limit, filters)
        seen = {row["rowid"] for row, _ in both}
        alone = self._ranked(scope, either, limit, filters)
        best = both + [(row, rank) for row, rank in alone if row["rowid"] not in seen]
        best.sort(key=lambda ranked: (ranked[1], -ranked[0]["updated_at"]))
        return best

    def _counts(self, terms: list[str]) -> dict[str, int]:
        """Rows holding each word (all scopes, as BM25 counts), up to ``_COUNT_UP_TO``."""
        return {
            term: self._db.execute(
                "select count(*) from (select 1 from items_fts where items_fts match ? limit ?)",
                (match_expression([term]), self._count_up_to),
            ).fetchone()[0]
            for term in terms
        }

    def _ranked(
        self, scope: MemoryScope, match: str, limit: int, filters: Mapping[str, ScalarValue]
    ) -> list[tuple[sqlite3.Row, float]]:
        """The best ``limit`` items of ``scope`` matching ``match``: FTS5 ranks alone (``order
        by rank``: its own sorter, no join), over-fetching ``limit`` x 4 rows, and ``items`` is
        read for those only, keeping the scope and the filters. Too few kept while FTS5 had
        more: fetch 8 times as many, until FTS5 runs dry."""
        where, values = _filter_sql(filters)
        fetch = limit * _OVER_FETCH
        while True:
            ranked = self._db.execute(
                "select rowid, bm25(items_fts) as rank from items_fts where items_fts match ?"
                " order by rank limit ?",
                (match, fetch),
            ).fetchall()
            rank_of = {row["rowid"]: row["rank"] for row in ranked}
            rows = self._db.execute(
                _BY_ROWID + where, (json.dumps(list(rank_of)), str(scope), *values)
            ).fetchall()
            if len(rows) >= limit or len(ranked) < fetch:
                rows.sort(key=lambda row: (rank_of[row["rowid"]], -row["updated_at"]))
                return [(row, rank_of[row["rowid"]]) for row in rows[:limit]]
            fetch *= _WIDEN

    def close(self) -> None:
        self._db.close()
