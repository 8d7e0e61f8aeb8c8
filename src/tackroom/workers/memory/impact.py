"""The impact index: beside FTS5's index, each word's items ordered by their share of the BM25
score, so a search reads the head of a few lists and stops (:mod:`.topk`).

Tables (memory schema 2):

- ``terms (id, term, df)``: each token FTS5's tokenizer makes, and how many items hold it;
- ``scopes (id, scope)``: a number for each scope;
- ``postings (scope, term, impact, doc, tf, dl)``, keyed ``(scope, term, impact desc, doc)``: a
  word's items in a scope, highest impact first. ``impact`` is :func:`.bm25.impact` of the item's
  count of the word and its length, at ``index_stats.avgdl_ref``;
- ``doc_terms (doc, term, tf, dl)``: an item's tokens and its length, to score a candidate and
  to delete an item;
- ``index_stats (docs, tokens, avgdl_ref)``: FTS5's row count and token total, and the average
  length the impacts were computed at. When the average moves more than :data:`DRIFT` away, the
  impacts are recomputed (:meth:`ImpactIndex.rekey`); the bounds hold either way, they only get
  looser.

The tokens come from FTS5 itself, through a contentless temp table with the same tokenizer and
``fts5vocab``, so they are FTS5's to the byte. ``doc`` is the ``items`` rowid.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from tackroom.workers.memory.bm25 import impact

__all__ = ["DRIFT", "INDEX_SCHEMA", "TOKENIZE", "ImpactIndex", "IndexStats"]

TOKENIZE = "porter unicode61 remove_diacritics 2"
DRIFT = 1.25
"""Impacts are recomputed when the average length is this factor away from their reference."""
REKEY_WHILE_SAVING = 20_000
"""A save recomputes drifted impacts only in a store this small (a second at most); a larger
store does it when it is next opened."""
_WORD_CACHE = 4096

INDEX_SCHEMA = """
create table if not exists terms (
    id integer primary key, term text not null unique, df integer not null
);
create table if not exists scopes (id integer primary key, scope text not null unique);
create table if not exists postings (
    scope integer not null, term integer not null, impact integer not null,
    doc integer not null, tf integer not null, dl integer not null,
    primary key (scope, term, impact desc, doc)
) without rowid;
create table if not exists doc_terms (
    doc integer not null, term integer not null, tf integer not null, dl integer not null,
    primary key (doc, term)
) without rowid;
create table if not exists index_stats (
    one integer primary key check (one = 1),
    docs integer not null, tokens integer not null, avgdl_ref real not null
);
insert or ignore into index_stats values (1, 0, 0, 1.0);
"""
_SCRATCH = f"""
create virtual table if not exists temp.scratch using fts5(
    text, content='', tokenize='{TOKENIZE}'
);
create virtual table if not exists temp.scratch_row using fts5vocab(temp, scratch, row);
create virtual table if not exists temp.scratch_instance using fts5vocab(temp, scratch, instance);
"""


@dataclass(frozen=True)
class IndexStats:
    docs: int
    tokens: int
    reference: float
    """The average length the stored impacts were computed at."""

    @property
    def average(self) -> float:
        """FTS5's average row length (``nToken / nRow``); 0 for a store without tokens."""
        return self.tokens / self.docs if self.tokens else 0.0

    @property
    def drifted(self) -> bool:
        if not self.tokens:
            return False
        return not 1 / DRIFT <= self.average / self.reference <= DRIFT


class ImpactIndex:
    """Keeps the tables above in step with ``items``; called inside the store's transactions."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._words: dict[str, tuple[str, ...]] = {}
        self._scopes: dict[str, int] = {}
        db.create_function("tackroom_impact", 3, impact, deterministic=True)
        db.executescript(_SCRATCH)

    def stats(self) -> IndexStats:
        docs, tokens, reference = self._db.execute(
            "select docs, tokens, avgdl_ref from index_stats"
        ).fetchone()
        return IndexStats(docs=docs, tokens=tokens, reference=reference)

    def tokens_of(self, text: str) -> dict[str, int]:
        """Each token FTS5 makes of ``text``, and how often."""
        self._db.execute("insert into temp.scratch (scratch) values ('delete-all')")
        self._db.execute("insert into temp.scratch (rowid, text) values (1, ?)", (text,))
        return dict(self._db.execute("select term, cnt from temp.scratch_row").fetchall())

    def phrases(self, words: list[str]) -> list[str] | None:
        """The token of each query word, as FTS5 reads the phrase ``"word"``; None when a word is
        not exactly one token (``foo_bar`` is the phrase ``foo bar``; ``_`` is none)."""
        found = []
        for word in words:
            tokens = self._words.get(word)
            if tokens is None:
                if len(self._words) >= _WORD_CACHE:
                    self._words.clear()
                self._db.execute("insert into temp.scratch (scratch) values ('delete-all')")
                self._db.execute("insert into temp.scratch (rowid, text) values (1, ?)", (word,))
                rows = self._db.execute(
                    "select term from temp.scratch_instance order by offset"
                ).fetchall()
                tokens = self._words[word] = tuple(row[0] for row in rows)
            if len(tokens) != 1:
                return None
            found.append(tokens[0])
        return found

    def scope_id(self, scope: str, *, create: bool = False) -> int | None:
        """The number of ``scope`` (made when ``create``); None for a scope never saved to."""
        found = self._scopes.get(scope)
        if found is None:
            if create:
                self._db.execute("insert or ignore into scopes (scope) values (?)", (scope,))
            row = self._db.execute("select id from scopes where scope = ?", (scope,)).fetchone()
            if row is None:
                return None
            found = self._scopes[scope] = row[0]
        return found

    def add(self, doc: int, scope: str, text: str) -> None:
        counts = self.tokens_of(text)
        length = sum(counts.values())
        docs, tokens, reference = self._db.execute(
            "update index_stats set docs = docs + 1, tokens = tokens + ?"
            " returning docs, tokens, avgdl_ref",
            (length,),
        ).fetchone()
        if counts:
            ids = dict(
                self._db.execute(
                    "insert into terms (term, df) select value, 1 from json_each(?) where true"
                    " on conflict (term) do update set df = df + 1 returning term, id",
                    (json.dumps(list(counts)),),
                ).fetchall()
            )
            self._db.executemany(
                "insert into doc_terms (doc, term, tf, dl) values (?, ?, ?, ?)",
                [(doc, ids[term], tf, length) for term, tf in counts.items()],
            )
            number = self.scope_id(scope, create=True)
            self._db.executemany(
                "insert into postings (scope, term, impact, doc, tf, dl) values (?, ?, ?, ?, ?, ?)",
                [
                    (number, ids[term], impact(tf, length, reference), doc, tf, length)
                    for term, tf in counts.items()
                ],
            )
        stats = IndexStats(docs=docs, tokens=tokens, reference=reference)
        if stats.drifted and docs <= REKEY_WHILE_SAVING:
            self.rekey()

    def remove(self, doc: int, scope: str) -> None:
        rows = self._db.execute("select term, tf from doc_terms where doc = ?", (doc,)).fetchall()
        length = sum(tf for _, tf in rows)
        reference, number = self.stats().reference, self.scope_id(scope)
        self._db.executemany(
            "delete from postings where scope = ? and term = ? and impact = ? and doc = ?",
            [(number, term, impact(tf, length, reference), doc) for term, tf in rows],
        )
        self._db.execute("delete from doc_terms where doc = ?", (doc,))
        self._db.execute(
            "update terms set df = df - 1 where id in (select value from json_each(?))",
            (json.dumps([term for term, _ in rows]),),
        )
        self._db.execute("update index_stats set docs = docs - 1, tokens = tokens - ?", (length,))

    def in_step(self) -> bool:
        """Whether the index counts as many items as ``items`` holds (a cheap check at open)."""
        items = self._db.execute("select count(*) from items").fetchone()[0]
        return bool(items == self.stats().docs)

    def rebuild(self) -> None:
        """The whole index again from ``items``: the migration from schema 1, and the repair."""
        db = self._db
        for table in ("postings", "doc_terms", "terms"):
            db.execute(f"delete from {table}")
        db.execute("insert or ignore into scopes (scope) select distinct scope from items")
        db.execute("insert into temp.scratch (scratch) values ('delete-all')")
        db.execute("insert into temp.scratch (rowid, text) select rowid, text from items")
        db.execute("insert into terms (term, df) select term, doc from temp.scratch_row")
        db.execute(
            "insert into doc_terms (doc, term, tf, dl)"
            " select v.doc, t.id, count(*), sum(count(*)) over (partition by v.doc)"
            " from temp.scratch_instance v join terms t on t.term = v.term group by v.doc, t.id"
        )
        db.execute("insert into temp.scratch (scratch) values ('delete-all')")
        db.execute(
            "update index_stats set docs = (select count(*) from items),"
            " tokens = (select coalesce(sum(tf), 0) from doc_terms)"
        )
        self.rekey()

    def rekey(self) -> None:
        """Every impact again, at today's average length."""
        reference = self.stats().average or 1.0
        self._db.execute("update index_stats set avgdl_ref = ?", (reference,))
        self._db.execute("delete from postings")
        self._db.execute(
            "insert into postings (scope, term, impact, doc, tf, dl)"
            " select s.id, d.term, tackroom_impact(d.tf, d.dl, ?), d.doc, d.tf, d.dl"
            " from doc_terms d join items i on i.rowid = d.doc join scopes s on s.scope = i.scope"
            " order by 1, 2, 3 desc, 4",
            (reference,),
        )
