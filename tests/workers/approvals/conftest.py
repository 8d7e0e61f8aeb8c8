from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from tackroom.engine import Engine, RevisionConflict, StateEntry, UpdateOp, open_engine
from tackroom.runtime import Host
from tackroom.runtime.config import HarnessConfig
from tackroom.workers.approvals.worker import approvals_worker

TTL = 60.0


class FakeClock:
    """Seconds since the epoch that move only when told."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Interleaving:
    """Delegates to ``engine``, yielding to the loop a random number of times around every op
    (as a network round trip would) so concurrent callers really interleave; counts the writes
    that succeeded, per scope."""

    def __init__(self, engine: Engine, *, seed: int) -> None:
        self.engine = engine
        self.writes: Counter[str] = Counter()
        self._rng = random.Random(seed)

    async def _pause(self) -> None:
        for _ in range(self._rng.randint(0, 4)):
            await asyncio.sleep(0)

    async def get_state(self, scope: str, key: str) -> StateEntry | None:
        await self._pause()
        entry = await self.engine.get_state(scope, key)
        await self._pause()
        return entry

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        await self._pause()
        try:
            entry = await self.engine.set_state(
                scope, key, value, expected_revision=expected_revision
            )
        except RevisionConflict:
            await self._pause()
            raise
        self.writes[scope] += 1
        await self._pause()
        return entry

    async def update_state(self, scope: str, key: str, ops: list[UpdateOp]) -> StateEntry:
        await self._pause()
        entry = await self.engine.update_state(scope, key, ops)
        self.writes[scope] += 1
        await self._pause()
        return entry

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool:
        await self._pause()
        deleted = await self.engine.delete_state(scope, key, expected_revision=expected_revision)
        await self._pause()
        return deleted

    async def list_state(self, scope: str, *, prefix: str = "") -> list[StateEntry]:
        await self._pause()
        return await self.engine.list_state(scope, prefix=prefix)

    async def append(self, stream: str, group_id: str, data: Any) -> int:
        await self._pause()
        return await self.engine.append(stream, group_id, data)

    @property
    def atomic_transactions(self) -> bool:
        return self.engine.atomic_transactions

    def transaction(self) -> AbstractAsyncContextManager[None]:
        return self.engine.transaction()


def harness_config(**section: Any) -> HarnessConfig:
    return HarnessConfig.defaults().model_copy(
        update={"worker_config": {"approvals": {"ttl_seconds": TTL, **section}}}
    )


def approvals_host(clock: FakeClock, url: str = "embedded::memory:", **section: Any) -> Host:
    return Host(
        engine=open_engine(url),
        workers=[approvals_worker(clock)],
        config=harness_config(**section),
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def bus(clock: FakeClock) -> AsyncIterator[Engine]:
    """The approvals worker on a memory engine, reading time from ``clock`` (TTL 60 s)."""
    async with approvals_host(clock) as host:
        yield host.engine
