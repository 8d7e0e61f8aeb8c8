"""What a worker is (``WorkerSpec``) and what it gets from its host (``WorkerContext``).

A worker module exposes one ``WorkerSpec`` and lists it in the ``tackroom.workers`` entry point
group. Its ``start(ctx)`` registers functions and triggers through ``ctx`` and returns; the host
counts the worker as live once ``start`` has returned. Long-running work goes in tasks spawned
with ``ctx.spawn``, which the host cancels and awaits at shutdown.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, Unpack

from pydantic import BaseModel, ConfigDict

from tackroom._version import __version__
from tackroom.contracts.bus import Function, Tool
from tackroom.engine.errors import EngineUnavailable, unavailable_cause
from tackroom.engine.protocol import Engine, Handler, Registration, ServeOptions
from tackroom.runtime.tasks import TaskErrorHandler, TaskSet
from tackroom.runtime.typed import typed_handler

__all__ = ["WorkerConfig", "WorkerContext", "WorkerSpec", "version_of"]

ConfigT = TypeVar("ConfigT", bound=BaseModel)
RequestT = TypeVar("RequestT", bound=BaseModel)
ResponseT = TypeVar("ResponseT")
T = TypeVar("T")

_log = logging.getLogger("tackroom.runtime")


class WorkerConfig(BaseModel):
    """Convenient base of a worker's config section: unknown keys are an error, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSpec(Generic[ConfigT]):
    """The one entry point of a worker module."""

    name: str
    description: str
    config_model: type[ConfigT]
    start: Callable[[WorkerContext[ConfigT]], Awaitable[None]]
    version: str = ""
    """What the catalog announces as this worker's version; ``""``: the version of the installed
    distribution that holds its module (tackroom's own for a built-in; see :func:`version_of`)."""
    contracts: Mapping[str, int] = field(default_factory=dict)
    """``function_id -> schema_version`` of the contracts this worker was written against, for
    ``tackroom worker add`` to check before it is installed; at run time each function served
    through :meth:`WorkerContext.serve` announces its descriptor's version itself."""


def version_of(spec: WorkerSpec[Any]) -> str:
    """``spec.version``, else the version of the installed distribution its module belongs to
    (tackroom's own for a built-in, read without package metadata), else tackroom's."""
    if spec.version:
        return spec.version
    top = str(getattr(spec.start, "__module__", "") or "").split(".")[0]
    if top and top != "tackroom":
        from importlib.metadata import PackageNotFoundError, version

        for distribution in _distributions().get(top, []):
            try:
                return version(distribution)
            except PackageNotFoundError:
                continue
    return __version__


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    from importlib.metadata import packages_distributions

    return packages_distributions()


class WorkerContext(Generic[ConfigT]):
    """A worker's handle on the bus, its config, and the tasks it owns.

    Everything registered through the context is tagged ``worker=name`` and unregistered by the
    host at shutdown; registrations made directly on ``ctx.engine`` are the worker's own to undo.
    """

    def __init__(
        self,
        *,
        engine: Engine,
        name: str,
        config: ConfigT,
        on_task_error: TaskErrorHandler | None = None,
        announcements: list[str] | None = None,
        version: str = "",
    ) -> None:
        self.engine = engine
        self.name = name
        self.config = config
        self.version = version
        """What every registration made through this context announces as the worker's version."""
        self._announcements = announcements if announcements is not None else []
        self._registrations: list[Registration] = []
        self._tasks = TaskSet(owner=f"worker {name}", on_error=on_task_error)
        self._after_start: list[Callable[[], Awaitable[None]]] = []

    @property
    def registrations(self) -> list[Registration]:
        return list(self._registrations)

    def _track(self, registration: Registration) -> Registration:
        self._registrations.append(registration)
        return registration

    async def register_function(
        self, function_id: str, handler: Handler, **options: Unpack[ServeOptions]
    ) -> Registration:
        """Serve ``function_id`` with ``handler`` as this worker, at its version (see
        ``Engine.register_function``)."""
        return self._track(
            await self.engine.register_function(
                function_id, handler, worker=self.name, version=self.version, **options
            )
        )

    async def serve(
        self,
        function: Function[RequestT, ResponseT],
        handler: Callable[[RequestT], Awaitable[ResponseT]],
        *,
        description: str | None = None,
    ) -> Registration:
        """Serve ``function``'s contract with ``handler``: the request arrives validated, the
        reply is dumped by the response type, both schemas are published in the catalog (built
        when the catalog is first read, not here); a function declared ``hop`` makes no span.

        A :class:`~tackroom.contracts.bus.Tool` is served through ``register_tool`` instead, so
        its traits reach the catalog; its handler also gets the call context.
        """
        if isinstance(function, Tool):
            raise TypeError(f"{function!r} is a tool: serve it with runtime.tools.serve_tool")
        typed = typed_handler(function, handler)
        return await self.register_function(
            function.id,
            typed.handler,
            description=function.description if description is None else description,
            request_schema=typed.request_schema,
            response_schema=typed.response_schema,
            hop=function.hop,
            contract_version=function.contract_version,
        )

    async def add_state_trigger(self, scope: str, function_id: str) -> Registration:
        return self._track(
            await self.engine.add_state_trigger(scope, function_id, worker=self.name)
        )

    async def add_stream_trigger(self, stream: str, function_id: str) -> Registration:
        return self._track(
            await self.engine.add_stream_trigger(stream, function_id, worker=self.name)
        )

    async def add_cron_trigger(self, schedule: str, function_id: str) -> Registration:
        return self._track(
            await self.engine.add_cron_trigger(schedule, function_id, worker=self.name)
        )

    def after_start(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` once every worker of the boot list has started.

        For work that needs the other workers' functions live — resuming interrupted turns, say —
        rather than only this worker's.
        """
        self._after_start.append(callback)

    async def run_after_start(self) -> None:
        """The host calls this when the whole boot list is up."""
        callbacks, self._after_start = self._after_start, []
        for callback in callbacks:
            await callback()

    def announce(self, line: str) -> None:
        """A line for the person who started the process: ``tackroom serve`` and ``tackroom
        worker run`` print it once, to stdout, after their ready line. It is never logged, so it
        may hold what a log must not (the gateway's console URL carries its token)."""
        self._announcements.append(line)

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run ``coro`` as a background task the host cancels and awaits at shutdown.

        A task that fails stops the host (``WorkerCrashed``), as in a task group.
        """
        return self._tasks.spawn(coro, name=name)

    async def close(self) -> None:
        """Unregister everything (newest first), then cancel and await the worker's tasks.

        With the engine away (NATS down while the process stops), what could not be withdrawn
        is said in one line: it goes with the connection (subscriptions) or expires (catalog).
        """
        away: EngineUnavailable | None = None
        left = 0
        while self._registrations:
            registration = self._registrations.pop()
            try:
                await registration.unregister()
            except Exception as exc:
                cause = unavailable_cause(exc)
                if cause is None:
                    _log.exception("worker %s: unregistering %r failed", self.name, registration.id)
                    continue
                away, left = cause, left + 1
        if away is not None:
            _log.warning(
                "worker %s: %d registration(s) not withdrawn, the engine is away (%s); they end"
                " with the connection",
                self.name,
                left,
                away,
            )
        await self._tasks.cancel_all()
