"""Booting a harness: what it brings, the host that runs it, or the serve it attaches to.

:class:`Brings` is everything a program adds to the agent workers — Python tools, hooks, a model
object, a script, its own workers, another sessions worker. :func:`build_host` turns it and the
config into a :class:`~tackroom.runtime.host.Host`; :func:`attach` reaches a ``tackroom serve``
that owns the engine instead, which only works when the harness brings nothing that must run in
this process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tackroom.contracts.hooks import PUBLISH_COLLECT
from tackroom.engine.factory import open_engine
from tackroom.engine.protocol import Engine
from tackroom.engine.tracing import build_tracer_provider
from tackroom.harness.errors import UsageError
from tackroom.harness.models import model_worker
from tackroom.harness.remote import RemoteBus
from tackroom.harness.tools import ToolSpec, tools_worker
from tackroom.harness.wiring import ModelObject, ProviderObject, agent_host_config, with_agents
from tackroom.kit.hooks.subscribe import HookSpec, hook_worker
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.endpoint import LocalEndpoint
from tackroom.runtime.errors import EndpointUnavailable
from tackroom.runtime.host import Host
from tackroom.runtime.installed import boot_specs
from tackroom.runtime.worker import WorkerSpec

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["Brings", "attach", "build_host"]

TOOLS_WORKER = "harness-tools"
HOOKS_WORKER = "harness-hooks"
MEMORY_WORKERS = ("memory", "memory-postgres")
"""The workers serving long-term memory; a program's adapter stands in for them."""


@dataclass(slots=True)
class Brings:
    """What a harness adds to the agent workers of its config."""

    tools: dict[str, ToolSpec] = field(default_factory=dict)
    hooks: list[HookSpec] = field(default_factory=list)
    model_object: ModelObject | None = None
    script: Path | list[Any] | None = None
    workers: list[str | WorkerSpec[Any]] = field(default_factory=list)
    sessions_worker: str = "sessions"
    memory: WorkerSpec[Any] | None = None
    """A program's memory adapter, served in place of the ``memory`` worker."""
    """Run id → its tool timeout, for the tools served here (see ``tools_worker``)."""

    def in_process(self) -> list[str]:
        """What must run in this process (so cannot go through another process's endpoint)."""
        return [
            what
            for what, present in (
                ("tools defined in Python", bool(self.tools)),
                ("a model object", self.model_object is not None),
                ("hooks", bool(self.hooks)),
                ("a script", self.script is not None),
                ("a memory adapter", self.memory is not None),
            )
            if present
        ]

    def own_specs(self, *, model_name: str) -> list[WorkerSpec[Any]]:
        """The workers this harness defines itself: its model, tools and hooks workers."""
        specs = [w for w in self.workers if isinstance(w, WorkerSpec)]
        model = self.model_object
        if model is not None:
            specs.append(
                model.worker_spec()
                if isinstance(model, ProviderObject)
                else model_worker(model, model_name=model_name)
            )
        if self.tools:
            tools = list(self.tools.values())
            specs.append(tools_worker(TOOLS_WORKER, tools))
        if self.memory is not None:
            specs.append(self.memory)
        if self.hooks:
            specs.append(hook_worker(HOOKS_WORKER, *self.hooks))
        return specs


def build_host(
    config: HarnessConfig,
    brings: Brings,
    *,
    provider: str,
    model_name: str,
    engine_url: str,
    fallbacks: Sequence[str] = (),
    engine: Engine | None = None,
    tracer_provider: TracerProvider | None = None,
    serve_endpoint: bool = False,
    bare: bool = False,
) -> Host:
    """The host of the agent workers and what ``brings`` adds. ``bare``: only what it adds — the
    agent workers run in other processes on a shared engine (``attach=True`` on NATS)."""
    config = agent_host_config(
        config,
        provider="" if brings.model_object is not None else provider,
        script=brings.script,
        sessions=brings.sessions_worker,
        fallbacks=fallbacks,
    )
    config = with_agents(config, default_model=f"{provider}:{model_name}")
    names = [*config.workers, *(w for w in brings.workers if isinstance(w, str))]
    if brings.memory is not None:  # the program's adapter serves memory::save and ::search
        names = [name for name in names if name not in MEMORY_WORKERS]
    if brings.hooks:
        names.append("hooks")
        sections = dict(config.worker_config)
        orchestrator = dict(sections.get("orchestrator") or {})
        orchestrator.setdefault("hooks_function", PUBLISH_COLLECT.id)
        sections["orchestrator"] = orchestrator
        compactor = dict(sections.get("compactor") or {})
        compactor.setdefault("hooks_function", orchestrator["hooks_function"])
        sections["compactor"] = compactor
        config = config.model_copy(update={"worker_config": sections})
    own = brings.own_specs(model_name=model_name)
    defined = {spec.name for spec in own}
    wanted = [n for n in dict.fromkeys(names) if n not in defined]
    loaded = [] if bare else boot_specs(wanted, config.installed_workers, engine_url=engine_url)
    owned_tracing = None
    if engine is None:
        if tracer_provider is None:
            owned_tracing = tracer_provider = build_tracer_provider(
                config.tracing.to_tracing_config()
            )
        engine = open_engine(
            engine_url, tracer_provider=tracer_provider, trace_spans=config.tracing.spans
        )
        endpoint = (
            LocalEndpoint(
                engine,
                path=config.endpoint.socket,
                max_frame_bytes=config.endpoint.max_frame_bytes,
            )
            if serve_endpoint and engine_url.startswith("embedded:")
            else None
        )
    else:
        endpoint = None
    return Host(
        engine=engine,
        workers=[*loaded, *own],
        config=config,
        endpoint=endpoint,
        tracer_provider=tracer_provider,
        owns_tracer_provider=owned_tracing is not None,
    )


async def attach(
    config: HarnessConfig, brings: Brings, *, engine_url: str, socket: Path | None = None
) -> RemoteBus:
    """Reach the process that owns ``engine_url`` through its local endpoint."""
    own = brings.in_process()
    if own:
        raise UsageError(
            f"the engine {engine_url} is held by another process, and this harness brings"
            f" {', '.join(own)}, which need an engine of their own: stop that process, pass"
            " another home=, or share a NATS engine"
        )
    try:
        return await RemoteBus.connect(
            socket or config.endpoint.socket, max_frame_bytes=config.endpoint.max_frame_bytes
        )
    except EndpointUnavailable as exc:
        raise UsageError(
            f"the engine {engine_url} is held by another process that serves no endpoint"
            f" ({exc}): stop it, or run `tackroom serve` there"
        ) from None
