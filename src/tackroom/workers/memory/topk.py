"""The best ``limit`` items of a scope for a query, by FTS5's BM25, from the impact index
(:mod:`.impact`), without scoring every match.

The order is the store's rule (``kit.memory.all_words_first``) over every match at once: items
with every word first, then by score, then the most recently updated, then the highest rowid.
Scores are FTS5's ``-bm25()`` to the bit (:mod:`.scoring`).

How little is read:

1. The items with every word come from FTS5's own ``AND`` match, which only merges the lists
   (no ranking): when there are at most :data:`EVERY_CAP`, they are scored, and when they fill
   the ``limit``, that is the answer.
2. Otherwise the lists of rare tokens (at most :data:`SMALL_LIST` rows) are read whole, and FTS5
   tells which of their items hold each commoner token. An item's score is then known but for
   the commoner tokens it holds, and each of those adds at most its list's bound.
3. The commoner lists are read from their head, highest impact first, a batch at a time from
   the list whose unread rows could add the most (MaxScore's order; Turtle and Flood 1995),
   which lowers its bound (:func:`.bm25.ceiling`). An item met in none of the lists read so far
   scores at most the sum of the bounds.
4. An item is looked up (its counts, scope, filters and update time) only while its bound could
   still place it in the top (the combined algorithm of Fagin, Lotem and Naor 2003), most
   promising first; the search stops when neither a met item nor an unmet one can place.
"""

from __future__ import annotations

import heapq
import json
import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tackroom.contracts.memory import ScalarValue
from tackroom.workers.memory.bm25 import K1, ceiling, idf_ceiling
from tackroom.workers.memory.impact import IndexStats
from tackroom.workers.memory.scoring import Ranked, Scorer, Token

__all__ = ["EVERY_CAP", "SMALL_LIST", "SMALL_SHARE", "top_k"]

EVERY_CAP = 1024
"""Items with every word scored outright; more are left to the lists."""
SMALL_LIST = 2048
SMALL_SHARE = 16
"""A list of at most ``SMALL_LIST`` rows and at most a ``SMALL_SHARE``-th of the items is read
whole when the query has other tokens."""
FIRST_BATCH = 32
MAX_BATCH = 1024
LOOK_UP_BATCH = 64
READS_PER_LOOK_UP = 4
"""Rows read from the lists for each item looked up, about what each costs (CA's ratio)."""
SLACK = 1e-9
"""Bounds are raised by this share, so rounding never lets an item they exclude through."""


@dataclass
class _List:
    token: Token
    rows: sqlite3.Cursor
    bound: float
    """The most an item not read from this list yet can get from it."""
    batch: int = FIRST_BATCH
    done: bool = False


@dataclass
class _Search:
    scorer: Scorer
    limit: int
    ratio: float
    lists: list[_List]
    every_met: bool
    """Every item with every word has been looked up (or there is none)."""
    met: dict[int, list[Any]] = field(default_factory=dict)
    """Items read from some lists and not looked up yet: [what those lists add (an estimate,
    rounding aside), bits of the lists read from, bits of the lists shown not to hold it]."""
    dismissed: set[int] = field(default_factory=set)
    """Looked up, or shown unable to place: never again."""
    best: list[Ranked] = field(default_factory=list)
    """At most ``limit``, best first."""
    rows_read: int = 0
    looked_up: int = 0

    def run(self, every: list[int] | None) -> list[Ranked]:
        if every is not None:
            self._look_up(every)
            self.every_met, self.looked_up = True, 0
            if self._full() and self.best[-1][0]:
                return self.best
        most = min(SMALL_LIST, self.scorer.docs // SMALL_SHARE)
        small = [x for x in self.lists if x.token.df <= most] if len(self.lists) > 1 else []
        if small:
            for lst in small:
                self._read(lst, whole=True)
            for lst in self.lists:
                if not lst.done:
                    self._mark_absent(lst, small)
        while True:
            ranked = self._promising()
            open_lists = [x for x in self.lists if not x.done]
            if not ranked and self._unmet_out_of_reach(open_lists):
                return self.best
            budget = self.rows_read // READS_PER_LOOK_UP - self.looked_up
            while ranked and (budget > 0 or not open_lists or not self._full()):
                batch, ranked = ranked[:LOOK_UP_BATCH], ranked[LOOK_UP_BATCH:]
                self._look_up([doc for every, most, doc in batch if self._could_place(every, most)])
                budget -= len(batch)
                if ranked and not self._could_place(ranked[0][0], ranked[0][1]):
                    ranked = []
            if open_lists:
                self._read(max(open_lists, key=lambda x: x.bound))

    def _full(self) -> bool:
        return len(self.best) >= self.limit

    def _could_place(self, every: bool, most: float) -> bool:
        """Whether an item with at most ``most`` (and every word, when ``every``) could enter."""
        if not self._full():
            return True
        kth_every, kth_score, _, _ = self.best[-1]
        if every != kth_every:
            return every
        return most * (1 + SLACK) >= kth_score

    def _unmet_out_of_reach(self, open_lists: list[_List]) -> bool:
        """Whether no item not met yet can place: it holds only tokens of unread rows."""
        if not open_lists:
            return True
        every = not self.every_met and len(open_lists) == len(self.lists)
        return not self._could_place(every, sum(x.bound for x in open_lists))

    def _read(self, lst: _List, *, whole: bool = False) -> None:
        rows = lst.rows.fetchall() if whole else lst.rows.fetchmany(lst.batch)
        self.rows_read += len(rows)
        if whole or len(rows) < lst.batch:
            lst.done, lst.bound = True, 0.0
            lst.rows.close()
        else:
            lst.bound = lst.token.weight * ceiling(rows[-1][2], self.ratio)
            lst.batch = min(lst.batch * 2, MAX_BATCH)
        met, dismissed, bit = self.met, self.dismissed, lst.token.bit
        for doc, part, _ in rows:
            if doc in dismissed:
                continue
            item = met.get(doc)
            if item is None:
                met[doc] = [part, bit, 0]
            else:
                item[0] += part
                item[1] |= bit

    def _mark_absent(self, lst: _List, small: list[_List]) -> None:
        """Which met items ``lst``'s token is not in, from FTS5 (they all hold a small token)."""
        holding, bit = self.scorer.holding(lst.token, [x.token for x in small]), lst.token.bit
        for doc, item in self.met.items():
            if doc not in holding:
                item[2] |= bit

    def _promising(self) -> list[tuple[bool, float, int]]:
        """(could have every word, at most this score, rowid) of the met items that could
        place, best first. Items read from the same lists and shown absent from the same
        lists share what the unread lists could add."""
        all_bits = sum(x.token.bit for x in self.lists)
        done_bits = sum(x.token.bit for x in self.lists if x.done)
        bounds = [(x.token.bit, x.bound) for x in self.lists if not x.done]
        shapes: dict[tuple[int, int], tuple[bool, float, float]] = {}
        ranked, dropped = [], []
        for doc, (known, read, absent) in self.met.items():
            shape = shapes.get((read, absent))
            if shape is None:
                unknown = ~(read | absent)
                extra = sum(bound for bit, bound in bounds if unknown & bit)
                every = not self.every_met and not all_bits & ~read & (done_bits | absent)
                shape = shapes[read, absent] = (every, extra, self._needed(every, extra))
            every, extra, needed = shape
            if known >= needed:
                ranked.append((every, known + extra, doc))
            else:
                dropped.append(doc)
        for doc in dropped:
            del self.met[doc]
        self.dismissed.update(dropped)
        ranked.sort(reverse=True)
        return ranked

    def _needed(self, every: bool, extra: float) -> float:
        """The least known part with which an item can still place, given its shape."""
        if not self._full():
            return -math.inf
        kth_every, kth_score, _, _ = self.best[-1]
        if every != kth_every:
            return -math.inf if every else math.inf
        return kth_score / (1 + 2 * SLACK) - extra

    def _look_up(self, docs: list[int]) -> None:
        self.looked_up += len(docs)
        for doc in docs:
            self.met.pop(doc, None)
        self.dismissed.update(docs)
        if docs:
            self.best = heapq.nlargest(self.limit, self.best + self.scorer.rank(docs, self.limit))


def top_k(
    db: sqlite3.Connection,
    stats: IndexStats,
    words: list[str],
    phrases: list[str],
    *,
    scope: str,
    scope_id: int | None,
    limit: int,
    filters: Mapping[str, ScalarValue],
) -> list[Ranked]:
    """The best ``limit`` items of ``scope`` (numbered ``scope_id``; None: no item was ever
    saved to it) holding any of ``words`` (``phrases``: the token of each, as FTS5 reads it),
    best first. Filter keys are checked names (``kit.memory``)."""
    if not stats.tokens or scope_id is None:
        return []
    known: dict[str, tuple[int, int]] = {
        term: (term_id, df)
        for term, term_id, df in db.execute(
            "select term, id, df from terms where term in (select value from json_each(?))",
            (json.dumps(sorted(set(phrases))),),
        )
        if df > 0
    }
    tokens: dict[str, Token] = {}
    for word, phrase in zip(words, phrases, strict=True):
        if phrase not in known:
            continue
        term, df = known[phrase]
        token = tokens.get(phrase)
        if token is None:
            bit = 1 << len(tokens)
            token = tokens[phrase] = Token(term=term, df=df, bit=bit, word=word)
        token.weight += idf_ceiling(df, stats.docs)
    scorer = Scorer(
        db,
        stats=stats,
        phrases=[tokens.get(phrase) for phrase in phrases],
        scope=scope,
        filters=filters,
    )
    lists = [
        _List(token=token, rows=scorer.postings(token, scope_id), bound=token.weight * (K1 + 1))
        for token in tokens.values()
    ]
    every = None
    if len(tokens) > 1 and len(tokens) == len(set(phrases)):
        every = scorer.every(EVERY_CAP)
    search = _Search(
        scorer=scorer,
        limit=limit,
        ratio=stats.reference / stats.average,
        lists=lists,
        every_met=len(tokens) < len(set(phrases)),
    )
    try:
        return search.run(every)
    finally:
        for lst in lists:
            lst.rows.close()
