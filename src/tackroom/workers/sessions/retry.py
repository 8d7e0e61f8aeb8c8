"""Backing off after a lost compare-and-set."""

from __future__ import annotations

import asyncio
import random

__all__ = ["backoff"]


async def backoff(attempt: int) -> None:
    """Yield after losing race ``attempt`` (0 first); back off with jitter if it keeps happening."""
    await asyncio.sleep(random.uniform(0, min(0.05, 0.0005 * 2**attempt)) if attempt else 0)
