from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tackroom.contracts.messages import UserMessage
from tackroom.engine import Engine
from tackroom.testing import memory_engine
from tackroom.workers.sessions.store import SessionStore
from tests.workers.sessions.fakes import WrappedBackend


class FakeClock:
    """Seconds since the epoch that move only when told (whole seconds: constant JSON width)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float = 1.0) -> None:
        self.now += seconds


def user(text: str) -> UserMessage:
    return UserMessage.text(text)


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    async with memory_engine() as started:
        yield started


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def backend(engine: Engine) -> WrappedBackend:
    return WrappedBackend(engine)


@pytest.fixture
def store(backend: WrappedBackend, clock: FakeClock) -> SessionStore:
    return SessionStore(backend, clock=clock)
