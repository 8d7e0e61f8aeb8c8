from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tackroom.engine import Engine
from tackroom.testing import memory_engine
from tackroom.testing.fake_llm import FakeAnthropicServer, FakeOpenAIServer


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    async with memory_engine() as started:
        yield started


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server
        assert not server.violations, server.violations


@pytest.fixture
async def anthropic_server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server
        assert not server.violations, server.violations
