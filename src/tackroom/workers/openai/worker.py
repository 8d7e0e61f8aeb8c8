"""The ``openai`` worker: Chat Completions for OpenAI and every OpenAI-compatible server.

Each profile of its config (the shipped ones — ``openai``, ``ollama``, ``vllm``,
``lmstudio``, ``llamacpp``, ``deepseek``, ``moonshot``/``kimi``, ``openrouter`` — merged with
``worker_config.openai.profiles``) registers ``provider::<name>::stream``, ``::complete`` and
``::check``. See ``docs/workers/providers.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tackroom.kit.providers.config import ProfileSettings
from tackroom.kit.providers.hosting import import_wire, serve_profiles
from tackroom.kit.providers.retry import DEFAULT_RUNTIME, Runtime
from tackroom.kit.providers.service import ProviderService, WireAdapter
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.openai.config import WORKER_NAME, OpenAIConfig, OpenAIProfile

__all__ = ["WORKER", "start_openai"]


async def start_openai(
    ctx: WorkerContext[OpenAIConfig],
    *,
    runtime: Runtime = DEFAULT_RUNTIME,
    environ: Mapping[str, str] | None = None,
) -> list[ProviderService]:
    """Boot the worker through ``ctx``; ``runtime`` and ``environ`` are for tests."""
    wire: Any = import_wire("tackroom.workers.openai.wire", package="openai")

    def adapter_for(profile: ProfileSettings) -> WireAdapter:
        assert isinstance(profile, OpenAIProfile)
        adapter: WireAdapter = wire.OpenAIAdapter(profile)
        return adapter

    config = ctx.config
    return await serve_profiles(
        ctx,
        config.profiles,
        adapter_for=adapter_for,
        retry=config.retry,
        rate_limit=config.rate_limit,
        runtime=runtime,
        environ=environ,
    )


async def _start(ctx: WorkerContext[OpenAIConfig]) -> None:
    await start_openai(ctx)


WORKER = WorkerSpec(
    name=WORKER_NAME,
    description=(
        "Chat Completions over the official openai SDK: OpenAI and OpenAI-compatible servers"
        " (Ollama, vLLM, LM Studio, llama.cpp, DeepSeek, Kimi, OpenRouter) by profile."
    ),
    config_model=OpenAIConfig,
    start=_start,
)
