"""The SQLite store's FTS5 search (for queries whose words are not one token each) ranks only the
matches that can win (``bm25.splits``) and finds exactly what ranking every match finds: checked
on a Zipf-like corpus, two scopes and a metadata filter, with a low count cap so the splits
decide most searches. The impact index's search is checked in ``test_impact_search.py``."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.memory import MemoryHit, MemoryScope
from tackroom.kit.memory import all_words_first, falling_hits, query_terms
from tackroom.workers.memory.bm25 import K1, idf_ceiling, splits
from tackroom.workers.memory.scoring import match_expression
from tackroom.workers.memory.store import SqliteMemoryStore, _item

MINE = MemoryScope(kind="workspace", id="default")
THEIRS = MemoryScope(kind="user", id="other")


def test_idf_ceiling_is_fts5s_idf_and_never_negative() -> None:
    assert idf_ceiling(10, 1000) == pytest.approx(math.log(990.5 / 10.5))
    assert idf_ceiling(600, 1000) == 1e-6
    assert idf_ceiling(10, 2000) > idf_ceiling(10, 1000) > idf_ceiling(20, 1000)


def test_splits_go_rarest_first_and_bound_the_commoner_words() -> None:
    counts = {"common": 900, "rare": 1, "middle": 300}
    found = list(splits(counts, 1000))
    assert [(rare, common) for rare, common, _ in found] == [
        (["rare"], ["middle", "common"]),
        (["rare", "middle"], ["common"]),
    ]
    first_bound = (K1 + 1) * (idf_ceiling(300, 1000) + idf_ceiling(900, 1000))
    assert found[0][2] == pytest.approx(first_bound)
    assert found[1][2] == pytest.approx((K1 + 1) * 1e-6)


def test_a_split_whose_common_words_outweigh_its_rare_ones_is_skipped() -> None:
    counts = {"a": 100, "b": 110, "c": 120}
    assert [rare for rare, _, _ in splits(counts, 1000)] == [["a", "b"]]
    assert list(splits({"only": 5}, 1000)) == []


def _ranking_everything(
    store: SqliteMemoryStore, terms: list[str], limit: int, filters: dict[str, str]
) -> list[MemoryHit]:
    """The rule as it was: both stages ranked whole."""
    rows = all_words_first(
        terms,
        limit,
        lambda every: store._ranked(MINE, match_expression(terms, every=every), limit, filters),
        key=lambda ranked: ranked[0]["rowid"],
    )
    return falling_hits((_item(row), -rank) for row, rank in rows)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    rng = random.Random(11)
    vocabulary = [f"w{index}x" for index in range(2000)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    path = tmp_path_factory.mktemp("memory") / "memory.db"
    store = SqliteMemoryStore.open(path)
    for index in range(2500):
        words = rng.choices(vocabulary, weights=weights, k=rng.randint(4, 16))
        scope = THEIRS if index % 5 == 0 else MINE
        metadata = '{"topic":"ci"}' if index % 3 == 0 else "{}"
        store.save(scope, f"item-{index}", " ".join(words), metadata, 1000.0 + index)
    store.close()
    queries = [
        " ".join(rng.choices(vocabulary, weights=weights, k=rng.randint(2, 4))) for _ in range(150)
    ]
    return path, queries


@pytest.mark.parametrize("filters", [{}, {"topic": "ci"}])
def test_any_word_search_equals_ranking_every_match(
    corpus: tuple[Path, list[str]], filters: dict[str, str]
) -> None:
    path, queries = corpus
    store = SqliteMemoryStore.open(path, count_up_to=200)
    ranked, matches = store._ranked, []

    def recording(scope: MemoryScope, match: str, limit: int, filters: Any) -> Any:
        matches.append(match)
        return ranked(scope, match, limit, filters)

    decided = 0
    try:
        for query in queries:
            terms = query_terms(query)
            for limit in (3, 10):
                matches.clear()
                store._ranked = recording  # type: ignore[method-assign]
                found = store._search_fts(MINE, terms, limit=limit, filters=filters)
                store._ranked = ranked  # type: ignore[method-assign]
                assert found == _ranking_everything(store, terms, limit, filters), query
                split = any(") AND (" in match for match in matches)
                decided += split and match_expression(terms) not in matches
    finally:
        store.close()
    assert decided > 10  # a split, not the OR of all words, decided these
