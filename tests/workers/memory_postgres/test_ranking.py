"""The PostgreSQL store's any-word search ranks only rows with several of the words when
``ts_rank``'s bound allows (``coordination.levels``) and finds exactly what ranking every match
finds: checked on a Zipf-like corpus with two scopes and a metadata filter, on the local server
(skipped when none answers)."""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tackroom.contracts.memory import MemoryHit, MemoryScope
from tackroom.kit.memory import all_words_first, falling_hits, query_terms
from tackroom.workers.memory_postgres.coordination import MAX_ALTERNATIVES, disjunction, levels
from tackroom.workers.memory_postgres.store import PostgresMemoryStore, _item

DSN = os.environ.get("TACKROOM_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
MINE = MemoryScope(kind="workspace", id="default")
THEIRS = MemoryScope(kind="user", id="other")


def test_disjunction_reads_an_or_of_plain_lexemes_only() -> None:
    assert disjunction("'deploy' | 'key' | 'rotat'") == ["'deploy'", "'key'", "'rotat'"]
    assert disjunction("'it''s' | 'a\\\\b'") == ["'it''s'", "'a\\\\b'"]
    assert disjunction("'one'") == ["'one'"]
    assert disjunction("'a' <-> 'b' | 'c'") is None
    assert disjunction("'a':* | 'b'") is None
    assert disjunction("") is None


def test_levels_go_from_most_words_down_with_their_bounds() -> None:
    found = list(levels(["'a'", "'b'", "'c'", "'d'"]))
    assert [query.count("|") + 1 for query, _ in found] == [4, 6]
    assert found[0][0].startswith("('a' & 'b' & 'c') | ")
    assert [bound for _, bound in found] == pytest.approx([0.2 / 4, 0.1 / 4])
    assert list(levels(["'a'", "'b'"])) == []
    many = [f"'w{index}'" for index in range(12)]
    assert all(query.count("|") + 1 <= MAX_ALTERNATIVES for query, _ in levels(many))


@pytest.fixture(scope="module")
def store() -> Iterator[PostgresMemoryStore]:
    psycopg = pytest.importorskip("psycopg", reason="memory-postgres needs tackroom[postgres]")
    try:
        admin = psycopg.connect(DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {DSN} (set TACKROOM_TEST_POSTGRES): {exc}")
    schema = f"tackroom_test_{uuid.uuid4().hex[:12]}"
    opened = PostgresMemoryStore.open(
        DSN, schema=schema, table="memory", text_search_config="english"
    )
    try:
        rng = random.Random(11)
        vocabulary = [f"w{index}x" for index in range(2000)]
        weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
        for index in range(2500):
            words = rng.choices(vocabulary, weights=weights, k=rng.randint(4, 16))
            scope = THEIRS if index % 5 == 0 else MINE
            metadata = {"topic": "ci"} if index % 3 == 0 else {}
            opened.save(scope, f"item-{index}", " ".join(words), json.dumps(metadata), 1e3 + index)
        opened.queries = [  # type: ignore[attr-defined]
            " ".join(rng.choices(vocabulary, weights=weights, k=rng.randint(2, 5)))
            for _ in range(150)
        ]
        yield opened
    finally:
        opened.close()
        admin.execute(f'drop schema if exists "{schema}" cascade')
        admin.close()


def _ranking_everything(
    store: PostgresMemoryStore, terms: list[str], limit: int, filters: dict[str, str]
) -> list[MemoryHit]:
    """The rule as it was: both stages ranked whole."""

    def ranked(every: bool) -> list[tuple[Any, ...]]:
        if every:
            return store._ranked("plainto_tsquery", " ".join(terms), MINE, limit, filters)
        return store._ranked("websearch_to_tsquery", " or ".join(terms), MINE, limit, filters)

    rows = all_words_first(terms, limit, ranked, key=lambda row: row[1])
    return falling_hits((_item(row), float(row[6])) for row in rows)


@pytest.mark.parametrize("filters", [{}, {"topic": "ci"}])
def test_any_word_search_equals_ranking_every_match(
    store: PostgresMemoryStore, filters: dict[str, str]
) -> None:
    ranked, ranked_by, calls = store._ranked, store._ranked_by, []

    def recording(name: str, method: Any) -> Any:
        def call(*args: Any) -> Any:
            calls.append(args[0] if name == "ranked" else name)
            return method(*args)

        return call

    decided = 0
    for query in store.queries:  # type: ignore[attr-defined]
        terms = query_terms(query)
        for limit in (3, 10):
            calls.clear()
            store._ranked = recording("ranked", ranked)  # type: ignore[method-assign]
            store._ranked_by = recording("level", ranked_by)  # type: ignore[method-assign]
            found = store.search(MINE, terms, limit=limit, filters=filters)
            store._ranked, store._ranked_by = ranked, ranked_by  # type: ignore[method-assign]
            assert found == _ranking_everything(store, terms, limit, filters), query
            decided += "level" in calls and "websearch_to_tsquery" not in calls
    assert decided > 10  # a level, not the OR of all words ranked whole, decided these


def test_a_row_with_fewer_words_but_many_times_still_ranks_first(
    store: PostgresMemoryStore,
) -> None:
    # ts_rank: three of four words once each rank 0.0456; two words ten times each 0.0471.
    scope = MemoryScope(kind="agent", id="crafted")
    for index in range(3):
        store.save(scope, f"three-{index}", "alpha beta gamma", "{}", 1.0 + index)
    store.save(scope, "two", " ".join(["alpha beta"] * 10), "{}", 0.5)
    hits = store.search(scope, ["alpha", "beta", "gamma", "delta"], limit=3, filters={})
    assert [hit.item.id for hit in hits] == ["two", "three-2", "three-1"]
