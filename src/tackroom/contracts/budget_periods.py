"""Budget periods on UTC boundaries: the key of the period an instant falls in, and its bounds.

- ``day``: ``2026-11-30``, from 00:00 UTC to the next 00:00;
- ``week``: ISO week ``2026-W49``, from Monday 00:00 UTC;
- ``month``: ``2026-11``, from the 1st 00:00 UTC;
- ``total``: ``total``, from the budget's creation, never ending.

A new period is a new key, so spend rolls over without anyone writing anything at midnight.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

__all__ = ["Period", "period_bounds", "period_key"]

Period = Literal["day", "week", "month", "total"]


def _at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def period_key(period: Period, now: float) -> str:
    moment = _at(now)
    if period == "day":
        return moment.strftime("%Y-%m-%d")
    if period == "week":
        year, week, _ = moment.isocalendar()
        return f"{year:04d}-W{week:02d}"
    if period == "month":
        return moment.strftime("%Y-%m")
    return "total"


def period_bounds(period: Period, now: float, *, origin: float) -> tuple[float, float | None]:
    """``(start, end)`` of the period holding ``now``; ``total`` runs from ``origin`` forever."""
    moment = _at(now)
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        start, end = midnight, midnight + timedelta(days=1)
    elif period == "week":
        start = midnight - timedelta(days=moment.weekday())
        end = start + timedelta(days=7)
    elif period == "month":
        start = midnight.replace(day=1)
        end = (start + timedelta(days=32)).replace(day=1)
    else:
        return origin, None
    return start.timestamp(), end.timestamp()
