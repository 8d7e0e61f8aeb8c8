"""The base of every worker contract suite: a bus serving the worker under test, and helpers.

A suite subclasses :class:`WorkerContract` and writes its tests against function ids only. A
replacement worker proves it fits by subclassing the suite with its own ``worker_name`` (and,
to run on another backend, ``engine_url``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest

from tackroom.engine.errors import InvocationError
from tackroom.engine.factory import open_engine
from tackroom.engine.protocol import Engine
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.testing.engines import MEMORY_URL

__all__ = ["CONTRACT_TIMEOUT", "WorkerContract"]

CONTRACT_TIMEOUT = 10.0


class WorkerContract:
    worker_name: ClassVar[str]
    engine_url: ClassVar[str] = MEMORY_URL

    @pytest.fixture
    async def bus(self) -> AsyncIterator[Engine]:
        """An engine serving the worker under test (and nothing else)."""
        spec = load_worker(self.worker_name)
        async with Host(engine=open_engine(self.engine_url), workers=[spec]) as host:
            yield host.engine

    @staticmethod
    async def call(bus: Engine, function_id: str, payload: Any) -> Any:
        return await bus.trigger(function_id, payload, timeout=CONTRACT_TIMEOUT)

    @staticmethod
    async def failure(bus: Engine, function_id: str, payload: Any) -> InvocationError:
        """The typed error a call must fail with."""
        with pytest.raises(InvocationError) as caught:
            await bus.trigger(function_id, payload, timeout=CONTRACT_TIMEOUT)
        return caught.value

    @classmethod
    async def code_of(cls, bus: Engine, function_id: str, payload: Any) -> str:
        return (await cls.failure(bus, function_id, payload)).remote_code
