from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tackroom.engine import Engine, RevisionConflict, StateEntry
from tackroom.runtime import WorkerContext
from tackroom.testing import memory_engine
from tackroom.workers.budget.worker import BudgetConfig, make_worker
from tests.workers.sessions.fakes import WrappedBackend


class FakeClock:
    """Seconds since the epoch that move only when told."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def set(self, when: str) -> None:
        self.now = utc(when)


def utc(when: str) -> float:
    """``"2026-11-30 23:59:59"`` (UTC) as seconds since the epoch."""
    return datetime.fromisoformat(when).replace(tzinfo=UTC).timestamp()


class RacingBackend(WrappedBackend):
    """Yields around every state op (so compare-and-set races really happen) and counts lost
    races."""

    def __init__(self, engine: Engine, *, seed: int) -> None:
        super().__init__(engine, interleave=True, seed=seed)
        self.conflicts = 0

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        try:
            return await super().set_state(scope, key, value, expected_revision=expected_revision)
        except RevisionConflict:
            self.conflicts += 1
            raise


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    async with memory_engine() as started:
        yield started


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(utc("2026-11-30 12:00:00"))


async def start_replica(
    engine: Engine, clock: FakeClock, *, backend: Any = None, **config: Any
) -> WorkerContext[BudgetConfig]:
    """One budget worker on ``engine`` (several make replicas); close the context to stop it."""
    spec = make_worker(clock=clock, state=None if backend is None else (lambda _: backend))
    ctx = WorkerContext(
        engine=engine, name="budget", config=BudgetConfig(sweep_schedule=None, **config)
    )
    await spec.start(ctx)
    return ctx


@pytest.fixture
async def bus(engine: Engine, clock: FakeClock) -> AsyncIterator[Engine]:
    ctx = await start_replica(engine, clock)
    try:
        yield engine
    finally:
        await ctx.close()
