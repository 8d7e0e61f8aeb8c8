"""The host: one engine, the booted workers, and (when serving) the local endpoint.

Start order is engine, then each worker in boot-list order, then the endpoint; ``start`` returns
only when every worker's ``start`` has returned, so its registrations are live. Shutdown runs in
reverse: endpoint, then each worker newest first (unregister, then cancel and await its tasks),
then the engine. A worker that fails to start rolls back everything started before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tackroom.engine.factory import open_engine
from tackroom.engine.protocol import Engine, Running
from tackroom.engine.tracing import build_tracer_provider, span_bus
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.confine import ConfinedEngine
from tackroom.runtime.endpoint import LocalEndpoint
from tackroom.runtime.errors import ConfigError, WorkerCrashed, WorkerStartError
from tackroom.runtime.installed import boot_specs
from tackroom.runtime.registry import available_workers, is_builtin
from tackroom.runtime.worker import WorkerContext, WorkerSpec, version_of

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["Host"]

_log = logging.getLogger("tackroom.runtime")


class Host(Running):
    """Hosts ``workers`` on ``engine``; owns the engine's lifetime (starts and closes it)."""

    def __init__(
        self,
        *,
        engine: Engine,
        workers: Sequence[WorkerSpec[Any]],
        config: HarnessConfig | None = None,
        endpoint: LocalEndpoint | None = None,
        tracer_provider: TracerProvider | None = None,
        owns_tracer_provider: bool = True,
    ) -> None:
        """``tracer_provider``: the engine's, shut down at close when ``owns_tracer_provider``;
        its ``bus`` exporter, if any, ships through the engine while the host runs."""
        config = config if config is not None else HarnessConfig.defaults()
        names = [spec.name for spec in workers]
        for name in names:
            if names.count(name) > 1:
                raise ConfigError(config.path, f"worker {name!r} is listed twice", field="workers")
        self.engine = engine
        self.endpoint = endpoint
        self._plan = [(spec, config.worker_settings(spec)) for spec in workers]
        self._grants = dict(config.worker_grants)
        self._cleanup = contextlib.AsyncExitStack()
        self._tracer_provider = tracer_provider
        if tracer_provider is not None and owns_tracer_provider:
            self._cleanup.callback(tracer_provider.shutdown)
        self._stop = asyncio.Event()
        self.announcements: list[str] = []
        """What workers asked to tell the person who started the process (``announce``)."""
        self._crash: WorkerCrashed | None = None
        self._state = "new"

    @classmethod
    def from_config(
        cls,
        config: HarnessConfig,
        *,
        workers: Sequence[str] | None = None,
        engine_url: str | None = None,
        serve_endpoint: bool = False,
        read_only: bool = False,
    ) -> Host:
        """Build a host for ``workers`` (default: the config's boot list) on the config's engine.

        ``serve_endpoint`` opens the local endpoint when the engine is embedded (a NATS engine is
        already reachable by other processes). ``read_only``: the workers only read (see
        :func:`~tackroom.engine.factory.open_engine`).
        """
        if not all(is_builtin(name) for name in config.worker_config):
            config.check_worker_sections(available_workers())
        url = engine_url or config.engine
        names = config.workers if workers is None else workers
        specs = boot_specs(names, config.installed_workers, engine_url=url)
        provider = build_tracer_provider(config.tracing.to_tracing_config())
        try:
            engine = open_engine(
                url,
                tracer_provider=provider,
                trace_spans=config.tracing.spans,
                read_only=read_only,
            )
            endpoint = (
                LocalEndpoint(
                    engine,
                    path=config.endpoint.socket,
                    max_frame_bytes=config.endpoint.max_frame_bytes,
                )
                if serve_endpoint and url.startswith("embedded:")
                else None
            )
            return cls(
                engine=engine,
                workers=specs,
                config=config,
                endpoint=endpoint,
                tracer_provider=provider,
            )
        except BaseException:
            if provider is not None:
                provider.shutdown()
            raise

    @property
    def worker_names(self) -> list[str]:
        return [spec.name for spec, _ in self._plan]

    async def start(self) -> None:
        if self._state != "new":
            raise RuntimeError(f"host is {self._state}; a host starts once")
        self._state = "starting"
        stack = self._cleanup
        try:
            if self.endpoint is not None:
                self.endpoint.prepare_directory()
            await self.engine.start()
            stack.push_async_callback(self.engine.close)
            shipper = span_bus(self._tracer_provider)
            if shipper is not None:  # ships until every worker has closed
                await shipper.attach(self.engine)
                stack.push_async_callback(shipper.detach, self.engine)
            contexts: list[WorkerContext[Any]] = []
            for spec, settings in self._plan:
                grant = self._grants.get(spec.name)
                ctx = WorkerContext[Any](
                    engine=self.engine
                    if grant is None
                    else ConfinedEngine(self.engine, worker=spec.name, grant=grant),
                    name=spec.name,
                    config=settings,
                    on_task_error=functools.partial(self._task_failed, spec.name),
                    announcements=self.announcements,
                    version=version_of(spec),
                )
                stack.push_async_callback(ctx.close)
                try:
                    await spec.start(ctx)
                except Exception as exc:
                    raise WorkerStartError(spec.name, exc) from exc
                _log.info("worker %s started", spec.name)
                contexts.append(ctx)
            for ctx in contexts:
                await ctx.run_after_start()
            if self.endpoint is not None:
                stack.push_async_callback(self.endpoint.close)
                await self.endpoint.start()
        except BaseException:
            await self.close()
            raise
        self._state = "running"

    def request_stop(self) -> None:
        """Make :meth:`wait` return (signal handlers call this)."""
        self._stop.set()

    async def wait(self) -> None:
        """Wait for :meth:`request_stop` or a failed worker task (then raise ``WorkerCrashed``)."""
        await self._stop.wait()
        if self._crash is not None:
            raise self._crash

    async def close(self) -> None:
        """Undo everything ``start`` did, newest first; safe to call more than once."""
        if self._state == "closed":
            return
        self._state = "closed"
        await self._cleanup.aclose()

    def _task_failed(self, worker: str, task: asyncio.Task[Any], exc: BaseException) -> None:
        _log.error("worker %s: task %r failed", worker, task.get_name(), exc_info=exc)
        if self._crash is None:
            self._crash = WorkerCrashed(worker, task.get_name(), exc)
        self._stop.set()
