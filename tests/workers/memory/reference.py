"""What the SQLite memory store must hold and return, by brute force from FTS5 itself: hits from
``bm25()`` over every match, and the impact index rebuilt from FTS5's own vocabulary."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

from tackroom.contracts.memory import MemoryScope, ScalarValue
from tackroom.kit.memory import query_terms, score_of_rank
from tackroom.workers.memory.bm25 import impact
from tackroom.workers.memory.scoring import match_expression
from tackroom.workers.memory.store import SqliteMemoryStore, _filter_sql

MINE = MemoryScope(kind="workspace", id="default")
THEIRS = MemoryScope(kind="user", id="other")
FEW = MemoryScope(kind="agent", id="few")
VARIANTS = ["connect", "connected", "connecting", "connection", "Bär", "bar", "BAR"]


def reference(
    store: SqliteMemoryStore,
    scope: MemoryScope,
    query: str,
    *,
    limit: int,
    filters: Mapping[str, ScalarValue],
) -> list[tuple[str, float]]:
    """(id, score) of the hits: every match ranked by ``bm25()``, items with every word first,
    then by score, newest, highest rowid; scores capped as ``kit.memory.falling_hits`` does."""
    words, db = query_terms(query), store._db
    if not words:
        return []
    ranks = {
        rowid: -rank
        for rowid, rank in db.execute(
            "select rowid, bm25(items_fts) from items_fts where items_fts match ?",
            (match_expression(words),),
        )
    }
    every = {
        row[0]
        for row in db.execute(
            "select rowid from items_fts where items_fts match ?",
            (match_expression(words, every=True),),
        )
    }
    where, values = _filter_sql(filters)
    rows = db.execute(
        f"select i.rowid, i.item_id, i.updated_at from items i where i.scope = ?{where}",
        (str(scope), *values),
    ).fetchall()
    ranked = sorted(
        (
            (rowid in every, ranks[rowid], updated_at, rowid, item_id)
            for rowid, item_id, updated_at in rows
            if rowid in ranks
        ),
        reverse=True,
    )
    hits, floor = [], 1.0
    for _, rank, _, _, item_id in ranked[:limit]:
        floor = min(floor, score_of_rank(rank))
        hits.append((item_id, floor))
    return hits


def found(
    store: SqliteMemoryStore,
    scope: MemoryScope,
    query: str,
    *,
    limit: int,
    filters: Mapping[str, ScalarValue],
) -> list[tuple[str, float]]:
    hits = store.search(scope, query_terms(query), limit=limit, filters=filters)
    return [(hit.item.id, hit.score) for hit in hits]


def fill(store: SqliteMemoryStore, *, items: int, seed: int, queries: int = 60) -> list[str]:
    """A Zipf-like corpus in three scopes (a fifth in ``THEIRS``, a fiftieth in ``FEW``), a
    third with ``topic: ci``, texts of 1 to 20 words (many ties), update times shared by threes;
    and queries over it."""
    rng = random.Random(seed)
    vocabulary = [f"w{index}x" for index in range(600)] + VARIANTS
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    for index in range(items):
        words = rng.choices(vocabulary, weights=weights, k=rng.randint(1, 20))
        scope = FEW if index % 50 == 1 else THEIRS if index % 5 == 0 else MINE
        metadata = '{"topic":"ci"}' if index % 3 == 0 else "{}"
        store.save(scope, f"item-{index}", " ".join(words), metadata, 1e3 + index // 3)
    found = [
        " ".join(rng.choices(vocabulary, weights=weights, k=rng.randint(1, 4)))
        for _ in range(queries)
    ]
    found += [f"{rng.choice(VARIANTS)} {rng.choice(VARIANTS)} w1x" for _ in range(queries // 10)]
    return [*found, "w0x w0x w5x", "absentword w3x", "absentword", "w0x absentword w2x w1x"]


def index_state(store: SqliteMemoryStore) -> dict[str, object]:
    """The impact index as stored, and as FTS5's vocabulary says it should be."""
    db = store._db
    db.execute(
        "create virtual table if not exists temp.check_instance"
        " using fts5vocab(main, items_fts, instance)"
    )
    counts = Counter(
        (doc, term) for term, doc in db.execute("select term, doc from temp.check_instance")
    )
    lengths: Counter[int] = Counter()
    for (doc, _), tf in counts.items():
        lengths[doc] += tf
    names = dict(db.execute("select id, term from terms"))
    scopes = dict(db.execute("select rowid, scope from items"))
    stats = store._index.stats()
    stored = {
        "doc_terms": {
            (doc, names[term], tf, dl)
            for doc, term, tf, dl in db.execute("select doc, term, tf, dl from doc_terms")
        },
        "postings": {
            (scope, doc, names[term], tf, dl, level)
            for scope, doc, term, tf, dl, level in db.execute(
                "select s.scope, doc, term, tf, dl, impact from postings p"
                " join scopes s on s.id = p.scope"
            )
        },
        "df": dict(db.execute("select term, df from terms where df != 0")),
        "docs": stats.docs,
        "tokens": stats.tokens,
    }
    expected = {
        "doc_terms": {(doc, term, tf, lengths[doc]) for (doc, term), tf in counts.items()},
        "postings": {
            (scopes[doc], doc, term, tf, lengths[doc], impact(tf, lengths[doc], stats.reference))
            for (doc, term), tf in counts.items()
        },
        "df": dict(Counter(term for _, term in counts)),
        "docs": db.execute("select count(*) from items").fetchone()[0],
        "tokens": sum(counts.values()),
    }
    return {"stored": stored, "expected": expected}
