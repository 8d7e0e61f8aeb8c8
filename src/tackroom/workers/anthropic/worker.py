"""The ``anthropic`` worker: the Messages API with tools, thinking and prompt caching.

Each profile of its config (the shipped ``anthropic`` one merged with
``worker_config.anthropic.profiles``) registers ``provider::<name>::stream``, ``::complete``
and ``::check``. See ``docs/workers/providers.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tackroom.kit.providers.config import ProfileSettings
from tackroom.kit.providers.hosting import import_wire, serve_profiles
from tackroom.kit.providers.retry import DEFAULT_RUNTIME, Runtime
from tackroom.kit.providers.service import ProviderService, WireAdapter
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.anthropic.config import WORKER_NAME, AnthropicConfig, AnthropicProfile

__all__ = ["WORKER", "start_anthropic"]


async def start_anthropic(
    ctx: WorkerContext[AnthropicConfig],
    *,
    runtime: Runtime = DEFAULT_RUNTIME,
    environ: Mapping[str, str] | None = None,
) -> list[ProviderService]:
    """Boot the worker through ``ctx``; ``runtime`` and ``environ`` are for tests."""
    wire: Any = import_wire("tackroom.workers.anthropic.wire", package="anthropic")

    def adapter_for(profile: ProfileSettings) -> WireAdapter:
        assert isinstance(profile, AnthropicProfile)
        adapter: WireAdapter = wire.AnthropicAdapter(profile)
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


async def _start(ctx: WorkerContext[AnthropicConfig]) -> None:
    await start_anthropic(ctx)


WORKER = WorkerSpec(
    name=WORKER_NAME,
    description=(
        "The Messages API over the official anthropic SDK: text, tool_use, thinking with"
        " signatures, prompt caching, usage with cache reads and writes."
    ),
    config_model=AnthropicConfig,
    start=_start,
)
