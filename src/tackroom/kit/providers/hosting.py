"""Booting a profile-based provider worker: one :class:`ProviderService` per profile.

A worker (``openai``, ``anthropic``) hands :func:`serve_profiles` its validated profiles and a
factory that builds the SDK adapter for one profile. The SDK module is imported here, inside
the worker's ``start`` — never when ``tackroom`` itself is imported — and a missing SDK is a
clear start error naming the extra to install (:mod:`tackroom.extras`). The adapters' clients
are closed when the host shuts the worker down.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from tackroom.extras import MissingExtra, missing_extra
from tackroom.kit.providers.config import ProfileSettings, RateLimitSettings, RetrySettings
from tackroom.kit.providers.retry import DEFAULT_RUNTIME, Runtime
from tackroom.kit.providers.service import ProviderService, WireAdapter
from tackroom.runtime.errors import HarnessError
from tackroom.runtime.worker import WorkerContext

__all__ = ["MissingSDK", "import_wire", "serve_profiles"]


class MissingSDK(MissingExtra, HarnessError):
    """The provider SDK a worker needs is not installed; the message names the extra
    (``pip install 'tackroom[openai]'``)."""


def import_wire(module: str, *, package: str) -> ModuleType:
    """Import a worker's wire module (which imports the SDK ``package``)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        problem = missing_extra(exc, needed_by=f"the {package!r} provider worker")
        if problem is None:
            raise
        raise MissingSDK(
            extra=problem.extra, needed_by=problem.needed_by, module=exc.name or package
        ) from exc


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
        for function_id, handler, description, hop in service.table():
            await ctx.register_function(function_id, handler, description=description, hop=hop)
    return services
