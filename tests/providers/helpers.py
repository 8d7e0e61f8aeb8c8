"""Boot a provider worker on an engine, pointed at a fake server, on a clock that never waits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from tackroom.contracts.messages import AgentMessage, UserMessage
from tackroom.contracts.provider import ProviderRequest, ToolSpec
from tackroom.engine import Engine
from tackroom.kit.providers.retry import Runtime
from tackroom.kit.providers.service import ProviderService
from tackroom.runtime.worker import WorkerContext
from tackroom.testing.fake_llm import FakeLLMServer
from tackroom.workers.anthropic import config as anthropic_contracts
from tackroom.workers.anthropic.worker import start_anthropic
from tackroom.workers.openai import config as openai_contracts
from tackroom.workers.openai.worker import start_openai

__all__ = ["FakeTime", "Worker", "boot", "request"]

Worker = Literal["openai", "anthropic"]


@dataclass
class FakeTime:
    """A clock that moves only when something sleeps; every sleep is recorded."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)
    draw: float = 0.5

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def random(self) -> float:
        return self.draw

    def runtime(self) -> Runtime:
        return Runtime(sleep=self.sleep, clock=self.clock, random=self.random)


def request(
    *messages: AgentMessage,
    model: str = "test-model",
    tools: list[ToolSpec] | None = None,
    system_prompt: str = "You are a test.",
    **fields: Any,
) -> ProviderRequest:
    return ProviderRequest(
        model=model,
        system_prompt=system_prompt,
        messages=list(messages) or [UserMessage.text("Hello?")],
        tools=tools if tools is not None else [ToolSpec(name="fs__read", description="Read.")],
        **fields,
    )


@asynccontextmanager
async def boot(
    engine: Engine,
    worker: Worker,
    server: FakeLLMServer | None = None,
    *,
    name: str | None = None,
    profile: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    time: FakeTime | None = None,
    keep_shipped: bool = False,
) -> AsyncIterator[list[ProviderService]]:
    """Start ``worker`` with one profile ``name`` (default: the worker's name) at ``server``.

    The other shipped profiles are dropped unless ``keep_shipped``; ``environ`` replaces the
    process environment for key lookups (default: a key for the profile's env var).
    """
    name = name or worker
    contracts: Any = openai_contracts if worker == "openai" else anthropic_contracts
    raw: dict[str, Any] = dict(profile or {})
    if server is not None:
        raw.setdefault("base_url", server.base_url)
    raw.setdefault("api_key_env", "TEST_API_KEY")
    profiles: dict[str, Any] = {name: raw}
    if not keep_shipped:
        profiles.update({other: None for other in contracts.DEFAULT_PROFILES if other != name})
    section = {**dict(config or {}), "profiles": profiles}
    model = contracts.OpenAIConfig if worker == "openai" else contracts.AnthropicConfig
    validated = model.model_validate(section)
    ctx: WorkerContext[Any] = WorkerContext(engine=engine, name=worker, config=validated)
    env = {"TEST_API_KEY": "sk-test-key"} if environ is None else dict(environ)
    runtime = (time or FakeTime()).runtime()
    if worker == "openai":
        services = await start_openai(ctx, runtime=runtime, environ=env)
    else:
        services = await start_anthropic(ctx, runtime=runtime, environ=env)
    try:
        yield services
    finally:
        await ctx.close()
