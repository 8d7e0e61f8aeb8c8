"""The provider contract suite on the ``openai`` and ``anthropic`` workers, each running its
official SDK against a fake server that replays the scenario in its wire format."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from tackroom.engine import Engine
from tackroom.testing.contracts.provider import (
    FEATURES,
    ProviderContract,
    ProviderSubject,
    Scenario,
)
from tackroom.testing.fake_llm import (
    Answer,
    FakeAnthropicServer,
    FakeLLMServer,
    FakeOpenAIServer,
    FakeToolCall,
    FakeUsage,
    Reply,
)
from tests.providers.helpers import Worker, boot


def reply_for(scenario: Scenario) -> Reply:
    """The fake server's reply that makes a provider worker answer ``scenario``."""
    if scenario.error_kind == "auth":
        return Reply.unauthorized(scenario.error_message)
    if scenario.error_kind == "rate_limited":
        return Reply.rate_limited(scenario.error_message, retry_after=scenario.retry_after)
    if scenario.error_kind is not None:
        raise AssertionError(f"no reply for {scenario.error_kind}")
    usage = scenario.usage
    return Reply(
        answer=Answer(
            text=scenario.text,
            thinking=scenario.thinking,
            tool_calls=[FakeToolCall(c.name, c.arguments) for c in scenario.tool_calls],
            usage=FakeUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
            )
            if usage is not None
            else FakeUsage(),
            chunk=5,
        )
    )


class FakeServerSubject:
    def __init__(self, worker: Worker, server_class: type[FakeLLMServer]) -> None:
        self.name = worker
        self.features = FEATURES
        self._worker: Worker = worker
        self._server_class = server_class

    @asynccontextmanager
    async def serving(
        self, engine: Engine, scenario: Scenario, *, calls: int = 1
    ) -> AsyncIterator[None]:
        async with self._server_class() as server:
            server.add(*[reply_for(scenario)] * calls)
            config = {"retry": {"max_retries": 0}}
            async with boot(engine, self._worker, server, config=config):
                yield
            assert server.pending == 0, f"{server.pending} replies were not asked for"
            assert not server.violations, server.violations


class TestOpenAIProvider(ProviderContract):
    @pytest.fixture
    def subject(self) -> ProviderSubject:
        return FakeServerSubject("openai", FakeOpenAIServer)


class TestAnthropicProvider(ProviderContract):
    @pytest.fixture
    def subject(self) -> ProviderSubject:
        return FakeServerSubject("anthropic", FakeAnthropicServer)
