"""Bounds on ``ts_rank`` for an OR of words, so an any-word search ranks the rows that can win.

For a query ``'a' | 'b' | ...`` of ``m`` distinct lexemes, PostgreSQL's ``ts_rank`` (weights
left at ``D`` = 0.1, as ``to_tsvector`` writes them; no normalisation) is the sum, over the
lexemes a row holds, of ``0.1 * sum(1 / j**2 for j in 1..tf) / 1.64493406685``, divided by
``m``. One lexeme adds at least ``0.0608 / m`` and less than ``0.1 / m``, however often it occurs.
So a row holding at most ``c - 1`` of the lexemes ranks below ``(c - 1) * 0.1 / m``: when the
best rows holding ``c`` or more of them reach that, no other row can enter the top, and only
rows with several of the words were ranked.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator

__all__ = ["MAX_ALTERNATIVES", "disjunction", "levels"]

MAX_ALTERNATIVES = 64
"""A level whose query would list more combinations of lexemes than this is left out."""
_LEXEME = r"'(?:[^'\\]|''|\\.)*'"
_DISJUNCTION = re.compile(rf"{_LEXEME}(?: \| {_LEXEME})*")


def disjunction(query: str) -> list[str] | None:
    """The quoted lexemes of a ``tsquery``'s text when it is an OR of plain lexemes (``'a' |
    'b'``), else None (a phrase, a prefix, a weight: the bound above does not hold)."""
    if not _DISJUNCTION.fullmatch(query):
        return None
    return re.findall(_LEXEME, query)


def levels(lexemes: list[str]) -> Iterator[tuple[str, float]]:
    """For ``c`` from ``len(lexemes) - 1`` down to 2: a ``tsquery`` text matching the rows with
    at least ``c`` of ``lexemes`` (quoted, as :func:`disjunction` gives them), and the rank no
    row with fewer reaches."""
    size = len(lexemes)
    for count in range(size - 1, 1, -1):
        if math.comb(size, count) > MAX_ALTERNATIVES:
            continue
        query = " | ".join(
            "(" + " & ".join(group) + ")" for group in itertools.combinations(lexemes, count)
        )
        yield query, (count - 1) * 0.1 / size
