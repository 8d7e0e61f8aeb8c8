"""The impact index stays exactly what FTS5's vocabulary says it should be — through saves,
replacements, deletes, the migration of a schema 1 store, a repair, and a change of the average
length — and the searches on it stay exact."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from tackroom.contracts.memory import MemoryScope
from tackroom.workers.memory import impact as impact_module
from tackroom.workers.memory.store import SCHEMA_VERSION, SqliteMemoryStore

from .reference import MINE, THEIRS, found, index_state, reference

FIXTURE = Path(__file__).parent / "fixtures" / "memory-v1.db"
"""A schema 1 store written by commit 4a5a3c6 (``fixtures/README.md``)."""
ALICE = MemoryScope(kind="user", id="alice")


def assert_in_step(store: SqliteMemoryStore) -> None:
    state = index_state(store)
    assert state["stored"] == state["expected"]


def assert_searches_exact(
    store: SqliteMemoryStore, queries: list[str], scopes: list[MemoryScope]
) -> None:
    hits = 0
    for query in queries:
        for scope in scopes:
            for filters in ({}, {"topic": "ci"}):
                expected = reference(store, scope, query, limit=10, filters=filters)
                assert found(store, scope, query, limit=10, filters=filters) == expected, query
                hits += len(expected)
    assert hits


def test_saves_replacements_and_deletes_keep_the_index_exact(tmp_path: Path) -> None:
    rng = random.Random(7)
    words = [f"v{index}y" for index in range(60)] + ["runs", "running", "Bär", "bar"]
    store = SqliteMemoryStore.open(tmp_path / "memory.db")
    try:
        for step in range(600):
            scope, item_id = rng.choice([MINE, THEIRS]), f"item-{rng.randrange(150)}"
            action = rng.random()
            if action < 0.65:
                text = " ".join(rng.choices(words, k=rng.randint(0, 14))) or "..."
                metadata = '{"topic":"ci"}' if rng.random() < 0.4 else "{}"
                store.save(scope, item_id, text, metadata, float(step))
            elif action < 0.75:  # the same text again: the index is left as it is
                item = store.get(scope, item_id)
                if item is not None:
                    store.save(scope, item_id, item.text, "{}", float(step))
            else:
                store.delete(scope, item_id)
        assert store._index.stats().docs > 50
        assert_in_step(store)
        assert_searches_exact(store, ["v0y v5y", "running v1y", "bar v2y v30y", "v59y"], [MINE])
        for scope in (MINE, THEIRS):
            for index in range(150):
                store.delete(scope, f"item-{index}")
        assert_in_step(store)
        assert store._db.execute("select count(*) from postings").fetchone()[0] == 0
        assert store._db.execute("select max(df) from terms").fetchone()[0] == 0
        assert (store._index.stats().docs, store._index.stats().tokens) == (0, 0)
        assert store.search(MINE, ["v0y"], limit=10, filters={}) == []
    finally:
        store.close()


def test_a_schema_1_store_is_indexed_when_opened_and_searched_exactly(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    shutil.copy(FIXTURE, path)
    with sqlite3.connect(path) as old:
        assert old.execute("select value from meta").fetchone() == ("1",)
        assert "postings" not in {row[0] for row in old.execute("select name from sqlite_master")}
    store = SqliteMemoryStore.open(path)
    try:
        version = store._db.execute("select value from meta where key = 'schema_version'")
        assert version.fetchone()[0] == str(SCHEMA_VERSION) == "2"
        assert store._index.stats().docs == 347
        assert_in_step(store)
        queries = ["w1x w2x", "running w0x", "run", "bar мир", "w3x w40x w7x", "replaced"]
        assert_searches_exact(store, queries, [MINE, ALICE])
        store.save(MINE, "item-2", "a new running note w1x", "{}", 5000.0)
        store.delete(ALICE, "item-4")
        assert_in_step(store)
        assert_searches_exact(store, queries, [MINE, ALICE])
    finally:
        store.close()
    SqliteMemoryStore.open(path).close()  # opened again: already schema 2, nothing to do


def test_a_store_of_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    SqliteMemoryStore.open(path).close()
    with sqlite3.connect(path) as db:
        db.execute("update meta set value = '3' where key = 'schema_version'")
        db.execute("drop table postings")
    with pytest.raises(RuntimeError, match="upgrade tackroom"):
        SqliteMemoryStore.open(path)
    with sqlite3.connect(path) as db:
        assert "postings" not in {row[0] for row in db.execute("select name from sqlite_master")}


def test_an_index_out_of_step_is_rebuilt_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = SqliteMemoryStore.open(path)
    for index in range(40):
        store.save(MINE, f"item-{index}", f"note {index} about w{index % 5}x", "{}", float(index))
    store.close()
    with sqlite3.connect(path) as db:  # a writer that knew nothing of the index
        db.execute("delete from items where item_id in ('item-3', 'item-4')")
        db.execute(
            "insert into items values (null, ?, 'extra', 'w1x extra', '{}', 99, 99)", (str(MINE),)
        )
    store = SqliteMemoryStore.open(path)
    try:
        assert_in_step(store)
        assert_searches_exact(store, ["w1x", "note w3x", "extra w1x"], [MINE])
    finally:
        store.close()


def test_impacts_follow_the_average_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "memory.db"
    store = SqliteMemoryStore.open(path)
    for index in range(30):
        store.save(MINE, f"short-{index}", f"w{index % 4}x tiny", "{}", float(index))
    assert store._index.stats().reference == pytest.approx(2.0)
    for index in range(30):  # ten times as long: the impacts are recomputed while saving
        store.save(MINE, f"long-{index}", " ".join(f"w{i % 9}x" for i in range(20)), "{}", 50.0)
    stats = store._index.stats()
    assert not stats.drifted
    assert stats.reference != pytest.approx(2.0)
    assert_in_step(store)
    store.close()

    monkeypatch.setattr(impact_module, "REKEY_WHILE_SAVING", 0)  # a large store: at next open
    store = SqliteMemoryStore.open(path)
    for index in range(60):
        store.save(MINE, f"longer-{index}", " ".join(f"w{i % 7}x" for i in range(80)), "{}", 9.0)
    assert store._index.stats().drifted
    assert_in_step(store)  # drifted impacts are still the impacts at their reference
    assert_searches_exact(store, ["w1x tiny", "w5x", "w0x w8x"], [MINE])
    store.close()
    store = SqliteMemoryStore.open(path)
    try:
        stats = store._index.stats()
        assert not stats.drifted
        assert stats.reference == stats.average
        assert_in_step(store)
        assert_searches_exact(store, ["w1x tiny", "w5x", "w0x w8x"], [MINE])
        for prefix, count in (("short", 30), ("long", 30), ("longer", 60)):
            for index in range(count):
                store.delete(MINE, f"{prefix}-{index}")
        assert store._db.execute("select count(*) from postings").fetchone()[0] == 0
    finally:
        store.close()
