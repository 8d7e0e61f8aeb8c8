"""The impact index's search (``topk``) returns what ranking every match with FTS5's ``bm25()``
returns — the same items in the same order with the same scores, to the bit — on a Zipf-like
corpus of 2,500 items: two scopes, a metadata filter, ties in score and in update time, words that
stem alike, repeated and absent words. Also with the reading thresholds at their extremes, so
each way of reading the lists decides searches; and against the FTS5 search it replaces.
``TACKROOM_SOAK=1``: 20,000 items and four times the queries."""

from __future__ import annotations

import itertools
import math
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.kit.memory import query_terms
from tackroom.workers.memory import topk
from tackroom.workers.memory.bm25 import IMPACT_SCALE, ceiling, impact, saturation
from tackroom.workers.memory.store import SqliteMemoryStore

from .reference import FEW, MINE, THEIRS, fill, found, reference


def test_the_ceiling_bounds_every_posting_sorted_after_it() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        reference_length, today = rng.uniform(2, 60), rng.uniform(2, 60)
        ratio = reference_length / today
        postings = [(rng.randint(1, 12), rng.randint(1, 200)) for _ in range(12)]
        levels = sorted((impact(tf, dl, reference_length), tf, dl) for tf, dl in postings)
        for index, (level, _, _) in enumerate(levels):
            bound = ceiling(level, ratio)
            for _, tf, dl in levels[: index + 1]:  # itself and everything sorted after it
                assert saturation(tf, dl, today) <= bound * (1 + 1e-12)
    assert ceiling(IMPACT_SCALE * 3, 0.5) == pytest.approx(2.2)  # never above k1 + 1


def test_impacts_sort_like_saturation_at_the_reference_length() -> None:
    pairs = [(tf, dl) for tf in range(1, 6) for dl in range(tf, 40)]
    by_impact = sorted(pairs, key=lambda p: impact(p[0], p[1], 18.0))
    scores = [saturation(tf, dl, 18.0) for tf, dl in by_impact]
    assert all(a <= b + 1 / IMPACT_SCALE for a, b in itertools.pairwise(scores))
    assert impact(1, 18, 18.0) == math.floor(saturation(1, 18, 18.0) * IMPACT_SCALE)


SOAK = os.environ.get("TACKROOM_SOAK") == "1"
pytestmark = pytest.mark.timeout(900 if SOAK else 60)  # the soak corpus takes minutes to fill
CASES: list[tuple[Any, dict[str, Any]]] = [
    (MINE, {}),
    (MINE, {"topic": "ci"}),
    (THEIRS, {}),
    (FEW, {}),
]


@pytest.fixture(scope="module")
def opened() -> Iterator[tuple[SqliteMemoryStore, list[str]]]:
    store = SqliteMemoryStore.open(Path(":memory:"))
    queries = fill(store, items=20_000 if SOAK else 2500, seed=11, queries=240 if SOAK else 60)
    yield store, queries
    store.close()


@pytest.fixture
def store(opened: tuple[SqliteMemoryStore, list[str]]) -> SqliteMemoryStore:
    return opened[0]


@pytest.fixture
def queries(opened: tuple[SqliteMemoryStore, list[str]]) -> list[str]:
    return opened[1]


@pytest.fixture(scope="module")
def expected(opened: tuple[SqliteMemoryStore, list[str]]) -> dict[tuple[str, int], Any]:
    """The 50 best of every query and case, ranking every match."""
    store, queries = opened
    return {
        (query, case): reference(store, scope, query, limit=50, filters=filters)
        for query in queries
        for case, (scope, filters) in enumerate(CASES)
    }


READING = {
    "default": {},
    "lists-only": {
        **{"EVERY_CAP": 0, "SMALL_LIST": 0},
        **{"FIRST_BATCH": 8, "LOOK_UP_BATCH": 5},
    },
    "whole-lists": {"EVERY_CAP": 10**9, "SMALL_LIST": 10**9, "SMALL_SHARE": 1},
}


@pytest.mark.parametrize("reading", sorted(READING))
def test_search_equals_ranking_every_match(
    store: SqliteMemoryStore,
    queries: list[str],
    expected: dict[tuple[str, int], Any],
    reading: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in READING[reading].items():
        monkeypatch.setattr(topk, name, value)
    for query in queries:
        assert store._index.phrases(query_terms(query)) is not None, query
        for case, (scope, filters) in enumerate(CASES):
            for limit in (1, 10, 50) if reading == "default" else (10,):
                got = found(store, scope, query, limit=limit, filters=filters)
                assert got == expected[query, case][:limit], (query, scope, filters, limit)
    assert sum(bool(hits) for hits in expected.values()) > len(queries)


def test_search_agrees_with_the_fts5_search_it_replaces(
    store: SqliteMemoryStore, queries: list[str]
) -> None:
    """The same scores in the same order; the same items, but where FTS5 broke a tie at the
    cut (its own order, not the update time). FTS5's scores can differ in the last bit: a split
    query (``rare AND common``) sums the phrases in another order than the query's."""
    for query in queries:
        terms = query_terms(query)
        new = store.search(MINE, terms, limit=10, filters={})
        old = store._search_fts(MINE, terms, limit=10, filters={})
        assert [hit.score for hit in new] == pytest.approx([hit.score for hit in old], rel=1e-12)
        if new:
            last = new[-1].score * (1 + 1e-12)
            above = [{h.item.id for h in hits if h.score > last} for hits in (new, old)]
            assert above[0] == above[1], query


def test_a_word_that_is_not_one_token_goes_to_the_fts5_search(store: SqliteMemoryStore) -> None:
    for words in (["w1x_w2x"], ["w0x", "_"], ["w3x", "a_b"]):
        terms = query_terms(" ".join(words))
        assert store._index.phrases(terms) is None
        assert store.search(MINE, terms, limit=10, filters={}) == store._search_fts(
            MINE, terms, limit=10, filters={}
        )
