from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tackroom.engine import Engine
from tackroom.testing import memory_engine


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    async with memory_engine() as started:
        yield started
