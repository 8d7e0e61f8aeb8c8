"""Upper bounds on FTS5's BM25, so an any-word search ranks the matches that can win, not all.

FTS5's ``bm25()`` adds, for each query phrase a row holds, ``idf * tf * (k1 + 1) / (tf + k1 *
(1 - b + b * length / average))`` with ``k1 = 1.2``, ``b = 0.75`` and ``idf = ln((N - n + 0.5) /
(n + 0.5))`` (``1e-6`` when that is not positive; ``N`` rows, ``n`` of them with the phrase). One
phrase therefore adds less than ``idf * (k1 + 1)``, whatever the row. Split the words into the
rarer and the commoner ones: a row holding none of the rarer words scores below the sum of the
commoner words' bounds, so once the best rows holding a rarer word reach that sum, no other row
can enter the top (MaxScore, Turtle & Flood 1995). Common words are in most rows; rare ones in
few, and only those few are ranked.

The same formula, computed here operation for operation as FTS5 computes it (:func:`saturation`),
scores the impact index's candidates (:mod:`.topk`) to the bit; :func:`ceiling` bounds what the
rows a posting list has not yet given can add.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

__all__ = [
    "IMPACT_SCALE",
    "K1",
    "B",
    "Split",
    "ceiling",
    "idf_ceiling",
    "impact",
    "saturation",
    "splits",
]

K1 = 1.2
"""FTS5's ``bm25()`` k1 (``b`` does not enter the bound)."""
B = 0.75
"""FTS5's ``bm25()`` b."""
IMPACT_SCALE = 1 << 20
"""A stored impact is ``saturation`` at the reference length, times this, rounded down."""

Split = tuple[list[str], list[str], float]
"""The rarer words, the commoner words, and the score no row without a rarer word reaches."""


def idf_ceiling(count: int, rows: int) -> float:
    """FTS5's idf of a word in ``count`` rows out of ``rows``; with ``count`` at most the true
    number and ``rows`` at least the true number, never below the true idf."""
    idf = math.log((rows - count + 0.5) / (count + 0.5))
    return idf if idf > 0 else 1e-6


def splits(counts: Mapping[str, int], rows: int) -> Iterator[Split]:
    """Ways to split the words of ``counts`` (word -> rows holding it, or a floor of that),
    rarest words first, each rarer part one word larger than the one before. A split whose
    commoner words could outscore its weakest rarer word is skipped (it would rarely decide
    the top and costs two queries), except the last."""
    words = sorted(counts, key=lambda word: counts[word])
    idf = {word: idf_ceiling(counts[word], rows) for word in words}
    for size in range(1, len(words)):
        rare, common = words[:size], words[size:]
        bound = (K1 + 1) * sum(idf[word] for word in common)
        if size < len(words) - 1 and bound > min(idf[word] for word in rare):
            continue
        yield rare, common, bound


def saturation(tf: float, length: float, average: float) -> float:
    """What one occurrence count adds per unit of idf: FTS5's ``(tf * (k1 + 1)) / (tf + k1 * (1
    - b + b * length / average))``, in its order of operations, so the sum over a query's phrases
    of ``idf * saturation`` (taken in the query's order) is ``-bm25()`` exactly."""
    return (tf * (K1 + 1.0)) / (tf + K1 * (1 - B + B * length / average))


def impact(tf: int, length: int, reference: float) -> int:
    """A posting's sort key: its ``saturation`` at the reference average length, quantised. Only
    ``+ - * /``, so the same everywhere: a deleted item's postings are found by recomputing it."""
    return int(saturation(tf, length, reference) * IMPACT_SCALE)


def ceiling(last: int, ratio: float) -> float:
    """The most ``saturation`` (at today's average length) a posting sorted after one with impact
    ``last`` can have; ``ratio`` is the reference length over today's average.

    Such a posting has ``s_ref < K = (last + 1) / IMPACT_SCALE``: with ``c = k1 (1 - b)``, ``y =
    k1 b length / reference`` and ``a = (k1 + 1) / K - 1`` that says ``y >= tf a - c``, and today
    the posting scores ``tf (k1 + 1) / (tf + c + ratio y)``. Maximised over ``tf >= 1``: ``K`` when
    ``ratio >= 1``, else ``(k1 + 1) / (1 + ratio a)`` (the limit of large ``tf``)."""
    top = min((last + 1) / IMPACT_SCALE, K1 + 1.0)
    if ratio >= 1:
        return top
    return (K1 + 1.0) / (1 + ratio * ((K1 + 1.0) / top - 1))
