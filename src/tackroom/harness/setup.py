"""What a :class:`~tackroom.harness.facade.Harness` brings, set before it starts: its options,
tools, agents, hooks, memory, session store and tracer.

:class:`HarnessSetup` is the configuration half of ``Harness`` (which adds starting, runs and
the ``sessions`` and ``approvals`` handles): the constructor's options and the seed 003 calls
(``register_tool``, ``use_memory``, ``add_hook``, ``set_tracer``) that fill the boot list. Tools
may also be registered once the harness has started: they are served from the next run on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, overload

from tackroom.contracts.agents import AGENT_PREFIX, AgentDefinition
from tackroom.contracts.context import ContextSettings, RecallSettings
from tackroom.contracts.principal import Principal
from tackroom.contracts.turn import Mode
from tackroom.engine.protocol import Engine
from tackroom.harness.agentconfig import AgentConfig, as_agent_config
from tackroom.harness.agents import AgentOptions, define_agent
from tackroom.harness.boot import Brings
from tackroom.harness.errors import UsageError
from tackroom.harness.lifecycle import hook_spec
from tackroom.harness.memory_adapter import MemoryAdapter, warn_session_store_once
from tackroom.harness.memory_use import MEMORY_TOOLS, memory_choice, with_recall
from tackroom.harness.remote import RemoteBus
from tackroom.harness.runs import ApprovalCallback
from tackroom.harness.tools import ToolOptions, ToolSpec, offered_tools
from tackroom.harness.wiring import ModelLike, choose_model, resolve_config, with_home
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.worker import WorkerSpec

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["HarnessSetup"]

F = TypeVar("F", bound=Callable[..., Any])


class HarnessSetup:
    """The options of a harness and what it brings (see the module's docstring)."""

    def __init__(
        self,
        model: ModelLike | None = None,
        *,
        config: HarnessConfig | str | Path | None = None,
        engine: str | Engine | None = None,
        instructions: str | None = None,
        tools: Sequence[Callable[..., Any] | ToolSpec | str] = (),
        max_turns: int | None = None,
        mode: Mode | None = None,
        output_type: Any = None,
        output_retries: int = 2,
        on_approval: ApprovalCallback | None = None,
        tracer_provider: TracerProvider | None = None,
        home: str | Path | None = None,
        script: Path | Sequence[Any] | None = None,
        serve_endpoint: bool = False,
        workers: Sequence[str | WorkerSpec[Any]] = (),
        attach: bool | str | Path = False,
        check_model: bool = True,
        principal: Principal | str | None = None,
        auto_approve: bool | None = None,
        context: ContextSettings | Mapping[str, Any] | None = None,
        agents: Sequence[AgentDefinition] = (),
    ) -> None:
        """``model`` is ``PROVIDER:MODEL`` (``openai:gpt-5-mini``, ``anthropic:…``, ``ollama:…``,
        ``scripted:NAME`` with ``script=``) — or a chain of them tried in order when a call fails
        with a transient or rate-limit error (``"openai:gpt-5-mini -> anthropic:claude-haiku-4-5"``)
        —, a model object (:class:`~tackroom.harness.models.StreamingModel`,
        ``tackroom.testing.FunctionModel``) or a provider object with a ``worker_spec()``
        (``tackroom.testing.ScriptedProvider``); ``None`` takes ``agent.model`` of the config.
        ``config`` is a :class:`HarnessConfig`, a path, or ``None`` for ``./tackroom.yaml`` (or the
        defaults). ``engine`` overrides the config's engine URL (``embedded:PATH``, ``nats://…``),
        or is an engine object not started yet (one a test wrapped or instrumented); the harness
        starts and closes it. ``home`` puts every file the harness keeps (engine, workspaces, vault,
        socket) under one directory.

        Safe by default: the built-in policy lets read-only tools and the program's own tools run,
        and asks (``on_approval``, or ``tackroom approve``) before writes, shell, code, HTTP and MCP
        tools; ``auto_approve=True`` answers yes for you (denials still hold), ``mode="plan"`` runs
        read-only tools only. ``principal`` (an id, or ``Principal(id=, roles=)``) is who the runs
        act for: the policy sees it, tools' ``required_permission`` is checked against its roles,
        and every gate decision names it. ``context`` sets the context budget
        (``context_window_limit``, ``reserve_tokens``, ``keep_last``, ``compact``, ``recall``; see
        docs/workers/compactor.md).
        """
        base = resolve_config(config)
        if auto_approve is not None:
            agent = base.agent.model_copy(update={"auto_approve": auto_approve})
            base = base.model_copy(update={"agent": agent})
        url = engine if isinstance(engine, str) else None
        if home is not None:
            base = with_home(base, Path(home), engine=url)
        self._config = base
        self._engine_object = None if engine is None or isinstance(engine, str) else engine
        self._engine_url = url or base.engine
        if self._engine_object is not None and attach is not False:
            raise UsageError("attach= needs an engine URL, not an engine object")
        self.instructions = instructions
        self.max_turns = max_turns or base.agent.max_turns
        self.mode: Mode = mode or base.agent.mode
        self.principal = (
            Principal(id=principal) if isinstance(principal, str) else principal
        ) or base.agent.principal
        self.context = (
            ContextSettings.model_validate(context) if isinstance(context, Mapping) else context
        )
        self.output_retries = output_retries
        self.on_approval = on_approval
        self._output_type = output_type
        self._tracer_provider = tracer_provider
        self._serve_endpoint = serve_endpoint
        self._attach_to = attach
        self._brings = Brings(
            workers=list(workers),
            script=Path(script) if isinstance(script, (str, Path)) else _listed(script),
        )
        self._tool_patterns: list[str] | None = None
        self._memory_tools: list[str] = []
        self._extra_providers: list[str] = []
        self._offered: list[str] | None = None
        self._late_tools: list[ToolSpec] = []
        """Tools registered after the start, not served yet (the next run serves them)."""
        self._check_models = check_model
        self._host: Host | None = None
        self._bus: Engine | RemoteBus | None = None
        choice = choose_model(
            model if model is not None else base.agent.model,
            config=base,
            scripted_ok=self._brings.script is not None or attach is not False,
        )
        self.provider, self.model = choice.provider, choice.model
        self.fallbacks = list(choice.fallbacks)
        """The models a failing call moves on to (``Harness("a:x -> b:y")``), in order."""
        self._brings.model_object = choice.model_object
        for definition in agents:
            self.add_agent(definition)
        for tool in tools:
            if isinstance(tool, str):
                self._patterns().append(tool)
            else:
                self.register_tool(tool)

    def _patterns(self) -> list[str]:
        if self._tool_patterns is None:
            self._tool_patterns = []
        return self._tool_patterns

    def _require_new(self, what: str) -> None:
        if self._bus is not None:
            raise UsageError(
                f"{what} must be set before the harness starts: set it before `async with`,"
                " `with` or the first run"
            )

    @overload
    def tool(self, function: F, /) -> F: ...

    @overload
    def tool(self, /, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...

    def tool(self, function: Any = None, /, **options: Unpack[ToolOptions]) -> Any:
        """Offer a Python function to the model (``@harness.tool`` or ``@harness.tool(...)``
        with :class:`~tackroom.harness.tools.ToolOptions`)."""

        def register(fn: F) -> F:
            self.register_tool(ToolSpec.from_function(fn, **options))
            return fn

        return register(function) if function is not None else register

    def register_tool(self, tool: Callable[..., Any] | ToolSpec) -> ToolSpec:
        """Offer ``tool`` to the model. On a started harness it is served from the next run on
        (not when the harness is attached to another process's engine, which cannot call it)."""
        spec = tool if isinstance(tool, ToolSpec) else ToolSpec.from_function(tool)
        tools = self._brings.tools
        if spec.name in tools:
            if tools[spec.name].function is not spec.function:
                raise UsageError(f"a tool named {spec.name!r} is registered already")
            return tools[spec.name]
        if self._bus is not None:
            if self.attached:
                raise UsageError(
                    f"tool {spec.name!r}: this harness is attached to another process's engine,"
                    " which cannot call a function defined here: register it before the"
                    " harness starts (before `async with` or the first run)"
                )
            self._late_tools.append(spec)
            self._offered = None
        tools[spec.name] = spec
        return spec

    def agent(self, name: str, **options: Unpack[AgentOptions]) -> AgentDefinition:
        """Define an agent this harness's agent may call as the tool ``agent::<name>`` (offered
        to it, as every agent of the config's ``agents:`` is) or hand over to
        (``handoff::<name>``, offered when ``tools=`` names it). Options (keyword only):
        ``instructions``, ``model`` (``PROVIDER:MODEL``; default: the harness's), ``tools`` (what
        the agent is offered), ``output_type`` (its answer comes back parsed and validated),
        ``description``, ``max_turns``, ``budget_usd`` (a sub-budget its run cannot exceed)."""
        return self.add_agent(define_agent(name, **options))

    def add_agent(self, definition: AgentDefinition) -> AgentDefinition:
        """Add an agent definition (:meth:`agent` builds one); its ``agent::<name>`` is offered."""
        self._require_new("agents")
        if any(known.name == definition.name for known in self._config.agents):
            raise UsageError(f"an agent named {definition.name!r} is defined already")
        self._config = self._config.model_copy(
            update={"agents": [*self._config.agents, definition]}
        )
        return definition

    def add_hook(self, event: str, function: Callable[[Any], Any]) -> None:
        """Call ``function`` at a point of the run: seed 003's lifecycle names
        (``before_thinking``, ``after_thinking``, ``before_acting``, ``after_acting``,
        ``after_observing``, ``on_finished``) or the hook topics they stand for
        (``before_model_call``, …; :mod:`tackroom.harness.lifecycle`). It gets the topic's
        payload and may return ``None``, ``block(reason)`` or ``replace(payload)``
        (``tackroom.hooks``) where the topic allows; sync or async."""
        self._require_new("hooks")
        taken = {spec.name for spec in self._brings.hooks if spec.name}
        self._brings.hooks.append(hook_spec(event, function, taken=taken))

    def use_memory(
        self,
        memory: MemoryAdapter | str | WorkerSpec[Any] | None = None,
        *,
        recall: bool | RecallSettings = True,
        tools: bool = True,
    ) -> None:
        """Give the agent long-term memory (seed 003): ``memory`` is an adapter with ``save`` and
        ``load`` (sync or async), served as ``memory::save``/``memory::search``; ``None``: the
        ``memory`` worker. ``recall``: before a run's first model call, what ``load`` finds for
        the user's message goes into the context (settings: ``RecallSettings``); ``tools``: the
        model is offered ``memory::save`` and ``memory::search``.

        A worker name or spec is the old meaning — the session store — and warns once: call
        :meth:`use_session_store`."""
        if isinstance(memory, (str, WorkerSpec)):
            warn_session_store_once()
            self.use_session_store(memory)
            return
        self._require_new("memory")
        choice = memory_choice(memory, recall=recall)
        if choice.spec is not None:
            self._brings.memory = choice.spec
        else:
            self._brings.workers.append("memory")
        if tools:
            self._memory_tools = list(MEMORY_TOOLS)
        if choice.recall is not None:
            self.context = with_recall(self.context or self._config.agent.context, choice.recall)

    def use_session_store(self, worker: str | WorkerSpec[Any]) -> None:
        """Serve sessions (the transcript tree and inboxes) with another worker, by name or spec."""
        self._require_new("the session store")
        if isinstance(worker, str):
            self._brings.sessions_worker = worker
        else:
            self._brings.sessions_worker = worker.name
            self._brings.workers.append(worker)

    def set_tracer(self, tracer_provider: TracerProvider) -> None:
        self._require_new("the tracer provider")
        self._tracer_provider = tracer_provider

    # -- what it offers ---------------------------------------------------------------------
    @property
    def attached(self) -> bool:
        """Attached to the engine of another process (a ``tackroom serve``) through its socket."""
        return isinstance(self._bus, RemoteBus)

    @property
    def config(self) -> HarnessConfig:
        return self._config

    @property
    def tool_names(self) -> Collection[str]:
        """The names of the tools registered in this program."""
        return self._brings.tools.keys()

    @property
    def offered_tools(self) -> list[str]:
        """The function ids (and patterns) every run is offered, unless its config says
        otherwise: see :func:`~tackroom.harness.tools.offered_tools`."""
        if self._offered is not None:
            return self._offered
        offered = offered_tools(
            self._config.agent,
            patterns=self._tool_patterns,
            tools=self._brings.tools.values(),
            more=[*self._memory_tools, *(f"{AGENT_PREFIX}{a.name}" for a in self._config.agents)],
        )
        if self._bus is not None:  # fixed once started, but for tools registered since
            self._offered = offered
        return offered

    def _agent_config(self, config: AgentConfig | Mapping[str, Any] | None) -> AgentConfig | None:
        """``config`` as an agent config; before the start, the providers it names join the
        boot list (on a harness already started, a config's model must be one it booted)."""
        agent = as_agent_config(config)
        if agent is not None and self._bus is None:
            booted = {self.provider, *(ref.provider for ref in self.fallbacks)}
            for ref in agent.models() or ():
                if ref.provider not in booted and ref.provider not in self._extra_providers:
                    self._extra_providers.append(ref.provider)
        return agent


def _listed(script: Sequence[Any] | None) -> list[Any] | None:
    return None if script is None else list(script)
