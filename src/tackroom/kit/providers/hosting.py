"""Booting a profile-based provider worker: one :class:`ProviderService` per profile.

A worker (``openai``, ``anthropic``) is a :class:`ProfileWorker`: its name, its config section
(a :class:`~tackroom.kit.providers.config.ProfilesConfig`) and the wire module whose adapter
class serves one profile. Its start hands :func:`serve_profiles` the validated profiles and
that adapter class. The SDK module is imported here, inside
the worker's ``start`` — never when ``tackroom`` itself is imported — and a missing SDK is a
clear start error naming the extra to install (:mod:`tackroom.extras`). The adapters' clients
are closed when the host shuts the worker down.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, TypeVar

from tackroom.extras import MissingExtra, missing_extra
from tackroom.kit.providers.config import (
    ProfilesConfig,
    ProfileSettings,
    RateLimitSettings,
    RetrySettings,
)
from tackroom.kit.providers.retry import DEFAULT_RUNTIME, Runtime
from tackroom.kit.providers.service import ProviderService, WireAdapter
from tackroom.runtime.errors import HarnessError
from tackroom.runtime.worker import WorkerContext, WorkerSpec

__all__ = ["MissingSDK", "ProfileWorker", "import_wire", "serve_profiles"]

ConfigT = TypeVar("ConfigT", bound=ProfilesConfig[Any])


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


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileWorker(Generic[ConfigT]):
    """A provider worker serving the profiles of its config section through one SDK.

    ``wire`` is the module holding ``adapter``, the :class:`WireAdapter` class built with one
    profile; it imports the SDK ``package``, so it is imported when the worker starts.
    """

    name: str
    description: str
    config_model: type[ConfigT]
    wire: str
    package: str
    adapter: str

    async def start(
        self,
        ctx: WorkerContext[ConfigT],
        *,
        runtime: Runtime = DEFAULT_RUNTIME,
        environ: Mapping[str, str] | None = None,
    ) -> list[ProviderService]:
        """Boot the worker through ``ctx``; ``runtime`` and ``environ`` are for tests."""
        adapter_for: Callable[[ProfileSettings], WireAdapter] = getattr(
            import_wire(self.wire, package=self.package), self.adapter
        )
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

    def spec(self) -> WorkerSpec[ConfigT]:
        async def start(ctx: WorkerContext[ConfigT]) -> None:
            await self.start(ctx)

        return WorkerSpec(
            name=self.name,
            description=self.description,
            config_model=self.config_model,
            start=start,
        )
