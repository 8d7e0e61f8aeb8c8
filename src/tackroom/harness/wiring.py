"""From the facade's options to a boot list: which workers, which config sections, where files go.

One place decides what an agent run boots — ``tackroom run``, ``tackroom serve``, the demo, the
tests and the benchmark all come through here — so they cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tackroom.contracts.approvals import REQUEST as APPROVAL_REQUEST
from tackroom.contracts.context import ContextSettings
from tackroom.contracts.hooks import PUBLISH_COLLECT
from tackroom.contracts.policy import CHECK_PERMISSIONS
from tackroom.contracts.turn import ModelRef, parse_model_chain
from tackroom.harness.errors import UsageError
from tackroom.harness.models import StreamingModel
from tackroom.kit.providers.routing import provider_worker
from tackroom.runtime.config import HarnessConfig, load_config
from tackroom.runtime.worker import WorkerSpec

__all__ = [
    "ModelChoice",
    "ModelLike",
    "ModelName",
    "ModelObject",
    "ProviderObject",
    "UsageError",
    "agent_host_config",
    "agent_workers",
    "choose_model",
    "fallback_providers",
    "gateway_host_config",
    "parse_model",
    "resolve_config",
    "served_config",
    "serves_elsewhere",
    "with_agents",
    "with_home",
]

_MODEL = re.compile(r"^([a-zA-Z0-9_-]+):(.+)$")


@runtime_checkable
class ProviderObject(Protocol):
    """A provider that boots itself as a worker (``tackroom.testing.ScriptedProvider``, a
    cassette's ``as_provider()``): served under ``name``."""

    @property
    def name(self) -> str: ...

    def worker_spec(self) -> WorkerSpec[Any]: ...


ModelObject = StreamingModel | ProviderObject
"""A model the harness serves itself: one that streams, or a provider that boots itself."""

ModelLike = str | ModelObject
"""What ``Harness(model=...)`` takes: ``PROVIDER:MODEL`` (or a chain ``a:x -> b:y``), or a
model object."""


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """What ``Harness(model=...)`` resolved to: the provider name runs call, the model name, and
    the model object the harness serves itself (``None`` for a ``PROVIDER:MODEL`` string)."""

    provider: str
    model: str
    model_object: ModelObject | None = None
    fallbacks: tuple[ModelRef, ...] = ()
    """The models after the first of a chain (``"a:x -> b:y"``), in the order they are tried."""


def choose_model(
    model: ModelLike | None, *, config: HarnessConfig, scripted_ok: bool
) -> ModelChoice:
    """A ``PROVIDER:MODEL`` string, a model object (``name`` and ``stream``) or a provider object
    (``name`` and ``worker_spec()``); ``scripted_ok``: a script comes from elsewhere."""
    if model is None:
        raise UsageError(
            "no model: pass Harness('PROVIDER:MODEL') or set agent.model in tackroom.yaml"
        )
    if isinstance(model, str) and "->" in model:
        try:
            first, *rest = parse_model_chain(model)
        except ValueError as exc:
            raise UsageError(f"{exc} in the model chain {model!r}") from None
        chosen = choose_model(str(first), config=config, scripted_ok=scripted_ok)
        return ModelChoice(chosen.provider, chosen.model, fallbacks=tuple(rest))
    if isinstance(model, str):
        name = parse_model(model)
        if name.provider == "scripted" and not scripted_ok:
            section = config.worker_config.get("scripted") or {}
            if not (section.get("script") or section.get("script_path")):
                raise UsageError(
                    "the scripted model needs a script: Harness(..., script=[...]),"
                    " or tackroom run --script FILE"
                )
        return ModelChoice(name.provider, name.model)
    provider = getattr(model, "name", None)
    kind = type(model).__name__
    if not isinstance(provider, str) or not provider:
        raise UsageError(f"model object {kind} has no name")
    if not isinstance(model, (StreamingModel, ProviderObject)):
        raise UsageError(f"model object {kind} has neither stream(request) nor worker_spec()")
    return ModelChoice(provider, str(getattr(model, "model", provider)), model)


@dataclass(frozen=True, slots=True)
class ModelName:
    provider: str
    model: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_model(model: str) -> ModelName:
    """``PROVIDER:MODEL`` (``openai:gpt-5-mini``, ``scripted:demo``)."""
    match = _MODEL.match(model.strip())
    if match is None:
        raise UsageError(
            "name a model as PROVIDER:MODEL, e.g. openai:gpt-5-mini or scripted:demo"
            f" (got {model!r})"
        )
    return ModelName(match.group(1), match.group(2))


def resolve_config(config: HarnessConfig | str | Path | None) -> HarnessConfig:
    """A config object as given, a file read from a path, or ``tackroom.yaml``/the defaults."""
    if isinstance(config, HarnessConfig):
        return config
    return load_config(Path(config) if config is not None else None)


def with_home(config: HarnessConfig, home: Path, *, engine: str | None) -> HarnessConfig:
    """Every file of the harness under ``home``: the engine database (unless ``engine`` names
    another), the endpoint socket, workspaces, skills, the credentials vault and the traces."""
    home = home.expanduser().absolute()
    sections: dict[str, dict[str, Any] | None] = dict(config.worker_config)

    def section(name: str, **values: Any) -> None:
        merged = dict(sections.get(name) or {})
        for key, value in values.items():
            merged.setdefault(key, value)
        sections[name] = merged

    section("files", workspace_root=str(home / "workspaces"))
    section("sandbox", workspace_root=str(home / "workspaces"))
    section("credentials", vault_path=str(home / "credentials.json"))
    section("directory", user_dir=str(home / "skills"))
    section("traces", path=str(home / "traces.db"))
    section("memory", path=str(home / "memory.db"))
    section("audit", path=str(home / "audit.db"), archive_dir=str(home / "audit-archive"))
    endpoint = config.endpoint.model_copy(update={"socket": home / "tackroom.sock"})
    return config.model_copy(
        update={
            "engine": engine or f"embedded:{home / 'engine.db'}",
            "endpoint": endpoint,
            "worker_config": sections,
        }
    )


def agent_workers(
    config: HarnessConfig,
    *,
    provider_worker_name: str | None,
    sessions: str = "sessions",
    more_providers: Sequence[str] = (),
) -> list[str]:
    """The boot list of an agent run: the config's agent workers, its own workers, the provider's
    worker, the trace store when spans go to the bus, the quota worker (and the hooks it charges
    tokens through) when ``worker_config.quota`` sets limits; ``sessions`` replaces the
    ``sessions`` worker (``Harness.use_session_store``)."""
    names = [*config.agent.workers, *config.workers, *config.installed_workers]
    mcp = config.worker_config.get("mcp")
    if isinstance(mcp, Mapping) and mcp.get("servers"):
        names.append("mcp")
    if config.worker_config.get("quota") is not None:
        names.extend(("hooks", "quota"))  # limits set: the quota worker charges model calls
    if provider_worker_name:
        names.append(provider_worker_name)
    names.extend(provider_worker_for(p, config.worker_config) for p in more_providers)
    if config.tracing.store and config.tracing.exports_to_bus:
        names.append(config.tracing.store)
    names = [sessions if name == "sessions" else name for name in names]
    return list(dict.fromkeys(names))


def provider_worker_for(provider: str, worker_config: Mapping[str, Any]) -> str:
    """The worker serving ``provider``: a profile's worker (``ollama`` → ``openai``), else the
    worker of that name (``scripted``, a user's own provider worker)."""
    return provider_worker(provider, worker_config) or provider


def agent_host_config(
    config: HarnessConfig,
    *,
    provider: str,
    script: Path | Sequence[Mapping[str, Any]] | None = None,
    sessions: str = "sessions",
    fallbacks: Sequence[str] = (),
) -> HarnessConfig:
    """``config`` with the agent's workers and ``provider``'s worker in the boot list (``sessions``
    serving the session tree); a script for the scripted provider goes into its section. The
    workers of the ``fallbacks`` providers and of every route's models boot too, and
    ``agent.routes`` becomes the orchestrator's ``routes`` (unless its section names some)."""
    worker = provider_worker_for(provider, config.worker_config) if provider else ""
    sections = dict(config.worker_config)
    routed = _route_providers(config, sections)
    if script is not None:
        section = {k: v for k, v in (sections.get("scripted") or {}).items() if k != "script_path"}
        section.pop("script", None)
        if isinstance(script, Path):
            section["script_path"] = str(script.resolve())
        else:
            section["script"] = [dict(turn) for turn in script]
        section.setdefault("per_session", True)
        section.setdefault("name", provider)
        sections["scripted"] = section
    workers = agent_workers(
        config,
        provider_worker_name=worker,
        sessions=sessions,
        more_providers=[*fallbacks, *routed],
    )
    _gate_on(
        sections, workers, auto_approve=config.agent.auto_approve, context=config.agent.context
    )
    return config.model_copy(update={"workers": workers, "worker_config": sections})


def _route_providers(
    config: HarnessConfig, sections: dict[str, dict[str, Any] | None]
) -> list[str]:
    """Copy ``agent.routes`` into the orchestrator's section; the providers the routes name."""
    orchestrator = dict(sections.get("orchestrator") or {})
    if config.agent.routes:
        orchestrator.setdefault("routes", dict(config.agent.routes))
        sections["orchestrator"] = orchestrator
    routes = orchestrator.get("routes")
    providers: list[str] = []
    for chain in (routes or {}).values() if isinstance(routes, Mapping) else ():
        try:
            refs = parse_model_chain(chain) if isinstance(chain, str) else []
        except ValueError as exc:
            raise UsageError(f"{exc} in the route {chain!r}") from None
        providers.extend(ref.provider for ref in refs)
    return providers


def _gate_on(
    sections: dict[str, dict[str, Any] | None],
    workers: list[str],
    *,
    auto_approve: bool,
    context: ContextSettings | None = None,
) -> None:
    """Safe by default: with a policy and an approvals worker booted, the orchestrator asks them
    (a config that names other functions, or ``null``, keeps its choice); ``auto_approve``
    makes the approvals worker answer yes to what the policy would ask a person about."""
    orchestrator = dict(sections.get("orchestrator") or {})
    if context is not None:
        orchestrator.setdefault("context", context.model_dump(mode="json", exclude_unset=True))
    for reader in ("compactor", "quarantine"):
        if reader not in workers:
            continue
        # Summaries and quarantined reads are model calls: the same budgets and model-call
        # hooks as the orchestrator's.
        section = dict(sections.get(reader) or {})
        for key in ("budget_check_function", "budget_record_function", "hooks_function"):
            if orchestrator.get(key) is not None:
                section.setdefault(key, orchestrator[key])
        sections[reader] = section
    if "quota" in workers:
        orchestrator.setdefault("hooks_function", PUBLISH_COLLECT.id)
    if "policy" in workers or "policy-cedar" in workers:
        orchestrator.setdefault("policy_function", CHECK_PERMISSIONS.id)
    if "approvals" in workers:
        orchestrator.setdefault("approvals_function", APPROVAL_REQUEST.id)
        if auto_approve:
            approvals = dict(sections.get("approvals") or {})
            approvals.setdefault("default_mode", "full")
            sections["approvals"] = approvals
    sections["orchestrator"] = orchestrator


def with_agents(config: HarnessConfig, *, default_model: str) -> HarnessConfig:
    """``config`` with the ``agents`` worker booted to serve its ``agents:`` (an agent naming no
    model runs on ``default_model``, the harness's); unchanged when it defines none."""
    if not config.agents:
        return config
    sections = dict(config.worker_config)
    section = dict(sections.get("agents") or {})
    section["agents"] = [agent.model_dump(mode="json") for agent in config.agents]
    section.setdefault("default_model", default_model)
    sections["agents"] = section
    workers = list(dict.fromkeys([*config.workers, "agents"]))
    return config.model_copy(update={"workers": workers, "worker_config": sections})


def serves_elsewhere(config: HarnessConfig, provider: str) -> bool:
    """Whether the config points ``provider``'s profile at another server (a proxy, a gateway, a
    fake): then the catalog's list of the provider's models says nothing about what it serves."""
    section = config.worker_config.get(provider_worker_for(provider, config.worker_config))
    profiles = section.get("profiles") if isinstance(section, Mapping) else None
    profile = profiles.get(provider) if isinstance(profiles, Mapping) else None
    return isinstance(profile, Mapping) and bool(profile.get("base_url"))


def gateway_host_config(config: HarnessConfig) -> HarnessConfig:
    """``config`` with the gateway's run defaults taken from ``agent.*`` (model, tools, mode,
    max_turns, principal, context), under what its own ``defaults`` already say."""
    agent = config.agent
    sections = dict(config.worker_config)
    gateway = dict(sections.get("gateway") or {})
    defaults = dict(gateway.get("defaults") or {})
    if agent.model is not None:
        defaults.setdefault("model", agent.model)
    defaults.setdefault("tools", list(agent.tools))
    defaults.setdefault("mode", agent.mode)
    defaults.setdefault("max_turns", agent.max_turns)
    if agent.principal is not None:
        defaults.setdefault("principal", agent.principal.model_dump(mode="json"))
    if agent.context is not None:
        defaults.setdefault("context", agent.context.model_dump(mode="json", exclude_unset=True))
    gateway["defaults"] = defaults
    sections["gateway"] = gateway
    return config.model_copy(update={"worker_config": sections})


def fallback_providers(config: HarnessConfig) -> list[str]:
    """The providers ``agent.model``'s fallbacks and the routes name (their workers boot too)."""
    sections = dict(config.worker_config)
    providers = _route_providers(config, sections)
    model = config.agent.model or ""
    if "->" in model:
        try:
            providers.extend(ref.provider for ref in parse_model_chain(model)[1:])
        except ValueError as exc:
            raise UsageError(f"{exc} in agent.model {model!r}") from None
    return providers


def served_config(config: HarnessConfig, workers: Sequence[str]) -> HarnessConfig:
    """What ``tackroom serve`` hosts ``workers`` with: the gate on when a policy and an approvals
    worker are among them (as for ``tackroom run``), ``agent.routes`` as the orchestrator's, and
    the gateway's run defaults."""
    sections = dict(config.worker_config)
    _route_providers(config, sections)
    _gate_on(
        sections,
        list(workers),
        auto_approve=config.agent.auto_approve,
        context=config.agent.context,
    )
    config = config.model_copy(update={"worker_config": sections})
    return gateway_host_config(config) if "gateway" in workers else config
