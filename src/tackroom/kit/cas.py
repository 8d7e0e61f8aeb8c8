"""Read, change, write by compare-and-set, again on a lost race: the one loop every worker that
keeps shared counters or records in the engine's state uses (budgets, quotas)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import Field

from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import StateBackend
from tackroom.runtime.worker import WorkerConfig

__all__ = [
    "CONTENTION_ERROR",
    "DELETE",
    "UNCHANGED",
    "CasConfig",
    "Contention",
    "StateBackend",
    "backoff",
    "mutate",
]

T = TypeVar("T")

CONTENTION_ERROR = "contention"

UNCHANGED: Any = object()
"""A change that returns this as its new value writes nothing."""
DELETE: Any = object()
"""A change that returns this as its new value deletes the key."""


class CasConfig(WorkerConfig):
    """The config of a worker that writes its records by compare-and-set."""

    max_attempts: int = Field(
        default=64, ge=1, description="compare-and-set attempts before failing with 'contention'"
    )


class Contention(FunctionError):
    """Every compare-and-set attempt lost a race: nothing was written; safe to retry."""

    def __init__(self, scope: str, key: str, attempts: int) -> None:
        super().__init__(
            CONTENTION_ERROR,
            f"{scope}/{key} kept changing ({attempts} attempts); nothing was written: retry",
        )


async def backoff(attempt: int) -> None:
    """After losing compare-and-set race ``attempt`` (0: the first): yield to the other tasks,
    and from the second loss on pause a short random time that grows with each loss."""
    await asyncio.sleep(random.uniform(0, min(0.05, 0.0005 * 2**attempt)) if attempt else 0)


async def mutate(
    backend: StateBackend,
    scope: str,
    key: str,
    change: Callable[[Any], tuple[Any, T]],
    *,
    attempts: int,
) -> T:
    """Read, ``change(value or None) -> (new value, result)``, write by compare-and-set; again on
    a lost race, after a short random pause. ``change`` may raise to abort (nothing written); it
    must have no side effects (it may run several times). :class:`Contention` after
    ``attempts`` lost races."""
    for attempt in range(attempts):
        if attempt:
            await backoff(attempt)
        entry = await backend.get_state(scope, key)
        new, result = change(None if entry is None else entry.value)
        if new is UNCHANGED:
            return result
        revision = 0 if entry is None else entry.revision
        try:
            if new is DELETE:
                if entry is not None and not await backend.delete_state(
                    scope, key, expected_revision=revision
                ):
                    continue
            else:
                await backend.set_state(scope, key, new, expected_revision=revision)
        except RevisionConflict:
            continue
        return result
    raise Contention(scope, key, attempts)
