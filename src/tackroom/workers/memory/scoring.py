"""The SQL the impact search (:mod:`.topk`) runs: posting lists, FTS5 matches, and scoring.

Scores are computed by SQLite, as FTS5's ``bm25()`` computes them: the same statistics (N and the
average length from ``index_stats``, each token's ``df``), the same counts (``doc_terms``), and the
same double arithmetic in the same order — per phrase ``idf * ((tf * (k1 + 1.0)) / (tf + k1 * (1 - b
+ b * dl / avgdl)))``, summed from ``0.0`` in the query's order, with every constant bound as a
parameter (never parsed from SQL text). So a score equals ``-bm25()`` to the bit, and ties are
ties.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.memory import ScalarValue
from tackroom.workers.memory.bm25 import K1, B, idf_ceiling
from tackroom.workers.memory.impact import IndexStats

__all__ = ["Ranked", "Scorer", "Token", "match_expression"]

Ranked = tuple[bool, float, float, int]
"""An item's place: (has every word, score, updated_at, rowid); larger is better."""

_SATURATION = "((%(tf)s * ?) / (%(tf)s + ? * (? + ? * %(dl)s / ?)))"
"""FTS5's ``(tf * (k1 + 1.0)) / (tf + k1 * (1 - b + b * D / avgdl))``, the constants bound."""


@dataclass
class Token:
    """A distinct token of the query that some item holds."""

    term: int
    df: int
    bit: int
    word: str
    """A query word that is this token (for FTS5 queries)."""
    weight: float = 0.0
    """Its idf times how many query words are this token."""


def match_expression(terms: list[str], *, every: bool = False) -> str:
    """An FTS5 query matching all (``every``) or any of ``terms``, each a quoted string: no user
    text is ever read as FTS5 syntax (a ``"`` inside a term is doubled, as FTS5 escapes it)."""
    joiner = " AND " if every else " OR "
    return joiner.join('"' + term.replace('"', '""') + '"' for term in terms)


class Scorer:
    def __init__(
        self,
        db: sqlite3.Connection,
        *,
        stats: IndexStats,
        phrases: list[Token | None],
        scope: str,
        filters: Mapping[str, ScalarValue],
    ) -> None:
        self._db = db
        self._average = stats.average
        self.docs = stats.docs
        self._phrases = phrases
        self._scope = scope
        self._filters = filters
        self._select, self._rank_params = self._ranking()

    def _constants(self) -> tuple[float, ...]:
        return (K1 + 1.0, K1, 1 - B, B, self._average)

    def postings(self, token: Token, scope_id: int) -> sqlite3.Cursor:
        """``token``'s list in the scope, highest impact first: (rowid, what it adds by
        ``weight``, impact)."""
        part = "? * " + _SATURATION % {"tf": "tf", "dl": "dl"}
        return self._db.execute(
            f"select doc, {part}, impact from postings where scope = ? and term = ?"
            " order by impact desc, doc",
            (token.weight, *self._constants(), scope_id, token.term),
        )

    def every(self, cap: int) -> list[int] | None:
        """The items holding every word (FTS5 ``AND``, unranked), or None if more than ``cap``."""
        words = [token.word for token in self._tokens()]
        found = self._db.execute(
            "select rowid from items_fts where items_fts match ? limit ?",
            (match_expression(words, every=True), cap + 1),
        ).fetchall()
        return [row[0] for row in found] if len(found) <= cap else None

    def holding(self, token: Token, others: list[Token]) -> set[int]:
        """The items holding ``token`` and any of ``others`` (FTS5, unranked)."""
        match = (
            f"{match_expression([token.word])} AND"
            f" ({match_expression([other.word for other in others])})"
        )
        rows = self._db.execute("select rowid from items_fts where items_fts match ?", (match,))
        return {row[0] for row in rows}

    def rank(self, docs: list[int], limit: int) -> list[Ranked]:
        """The best ``limit`` of ``docs`` in the scope and filters, scored in full."""
        return self._ranked(
            " where i.rowid in (select value from json_each(?)) and +i.scope = ?",
            [json.dumps(docs), self._scope],
            limit,
        )

    def _ranked(self, where: str, params: list[Any], limit: int) -> list[Ranked]:
        filters = "".join(
            f" and json_extract(i.metadata, '$.\"{key}\"') = ?" for key in self._filters
        )
        sql = (
            f"{self._select}{where}{filters}"
            " order by 3 desc, score desc, i.updated_at desc, i.rowid desc limit ?"
        )
        rows = self._db.execute(sql, (*self._rank_params, *params, *self._filters.values(), limit))
        return [(bool(every), score, updated_at, doc) for doc, updated_at, every, score in rows]

    def _tokens(self) -> list[Token]:
        return list({id(t): t for t in self._phrases if t is not None}.values())

    def _ranking(self) -> tuple[str, list[Any]]:
        tokens = self._tokens()
        alias = {token.term: f"d{index}" for index, token in enumerate(tokens)}
        lengths = [f"{alias[token.term]}.dl" for token in tokens]
        length = lengths[0] if len(lengths) == 1 else f"coalesce({', '.join(lengths)})"
        score, params = "0.0", []
        for token in self._phrases:
            if token is None:
                continue  # FTS5 adds 0.0 for a phrase no row holds
            tf = f"{alias[token.term]}.tf"
            score += f" + coalesce(? * {_SATURATION % {'tf': tf, 'dl': length}}, 0.0)"
            params += [idf_ceiling(token.df, self.docs), *self._constants()]
        every = " and ".join(f"{name}.tf is not null" for name in alias.values())
        if None in self._phrases:
            every = "0"
        joins = "".join(
            f" left join doc_terms {name} on {name}.doc = i.rowid and {name}.term = {int(term)}"
            for term, name in alias.items()
        )
        return (
            f"select i.rowid, i.updated_at, {every}, {score} as score from items i{joins}",
            params,
        )
