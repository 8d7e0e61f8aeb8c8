"""Booting a profile-based provider worker: one :class:`ProviderService` per profile.

A worker (``openai``, ``anthropic``) hands :func:`serve_profiles` its validated profiles and a
factory that builds the SDK adapter for one profile. The SDK module is imported here, inside
the worker's ``start`` — never when ``tackroom`` itself is imported — and a missing SDK is a
clear start error. The adapters' clients are closed when the host shuts the worker down.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from tackroom.kit.providers.config import ProfileSettings, RateLimitSettings, RetrySettings
from tackroom.kit.providers.retry import DEFAULT_RUNTIME, Runtime
from tackroom.kit.providers.service import ProviderService, WireAdapter
from tackroom.runtime.errors import HarnessError
from tackroom.runtime.worker import WorkerContext

__all__ = ["MissingSDK", "import_wire", "serve_profiles"]


class MissingSDK(HarnessError):
    """The provider SDK a worker needs is not installed."""


def import_wire(module: str, *, package: str) -> ModuleType:
    """Import a worker's wire module (which imports the SDK ``package``)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == package:
            raise MissingSDK(
                f"the {package!r} package is not installed (tackroom depends on it):"
                f" pip install {package}"
            ) from exc
        raise


async def serve_profiles(
    ctx: WorkerContext[Any],
    profiles: Mapping[str, ProfileSettings],
    *,
    adapter_for: Callable[[ProfileSettings], WireAdapter],
    retry: RetrySettings,
    rate_limit: RateLimitSettings,
    runtime: Runtime = DEFAULT_RUNTIME,
    environ: Mapping[str, str] | None = None,
) -> list[ProviderService]:
    """Register every profile's functions through ``ctx``; return the services."""
    services = [
        ProviderService(
            engine=ctx.engine,
            name=name,
            profile=profile,
            retry=profile.retry or retry,
            rate_limit=profile.rate_limit or rate_limit,
            adapter=adapter_for(profile),
            worker=ctx.name,
            runtime=runtime,
            environ=environ,
        )
        for name, profile in profiles.items()
    ]

    async def hold() -> None:
        """Own the SDK clients: close them when the host cancels the worker's tasks."""
        try:
            await asyncio.Event().wait()
        finally:
            for service in services:
                await service.aclose()

    ctx.spawn(hold(), name=f"{ctx.name} clients")
    for service in services:
        for function_id, handler, description in service.table():
            await ctx.register_function(function_id, handler, description=description)
    return services
