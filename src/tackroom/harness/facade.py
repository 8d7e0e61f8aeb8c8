"""``Harness``: the front door. A bus client that boots the workers an agent run needs.

    harness = Harness("openai:gpt-5-mini", instructions="Be brief.")

    @harness.tool
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    result = harness.run_sync("What is 2 + 3?")
    print(result.output)

Everything a run does happens on the bus: the prompt goes to ``run::start``, the answer comes
back as typed events on ``agent::events``, tools are functions ``tool::<name>`` served by this
process, a model object is served as a provider worker. Replacing a layer (the sessions worker,
the policy) changes the boot list, not this class.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack, overload

from pydantic import ValidationError

from tackroom.contracts.agents import AGENT_PREFIX, AgentDefinition
from tackroom.contracts.context import CompactResponse, ContextSettings, RecallSettings
from tackroom.contracts.events import EVENTS
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.principal import Principal
from tackroom.contracts.provider import ProviderCheckRequest, check_function
from tackroom.contracts.turn import (
    RUN_ABORT,
    RUN_START,
    TURN_GET_STATE,
    Mode,
    RunAbortRequest,
    RunStartRequest,
    RunStartResponse,
    TurnStateRequest,
    TurnStateView,
)
from tackroom.engine.errors import EngineError, EngineLocked, FunctionNotFound
from tackroom.engine.protocol import Engine
from tackroom.harness.agentconfig import AgentConfig, as_agent_config, configured
from tackroom.harness.agents import AgentOptions, define_agent
from tackroom.harness.boot import Brings, attach, build_host
from tackroom.harness.decisions import decide
from tackroom.harness.errors import UsageError
from tackroom.harness.lifecycle import hook_spec
from tackroom.harness.memory_adapter import BusMemory, MemoryAdapter, warn_session_store_once
from tackroom.harness.memory_use import MEMORY_TOOLS, memory_choice, with_recall
from tackroom.harness.modelcheck import unknown_model_problem
from tackroom.harness.models import StreamingModel
from tackroom.harness.output import OutputSchema, typed
from tackroom.harness.remote import RemoteBus
from tackroom.harness.result import PendingApproval, RunResult
from tackroom.harness.runs import ApprovalCallback, RunStream, SessionBusy
from tackroom.harness.sessions import compact_session, pin_entry, unpin_entry
from tackroom.harness.syncing import SyncLoop
from tackroom.harness.tools import ToolOptions, ToolSpec
from tackroom.harness.tree import follow_tree
from tackroom.harness.wiring import choose_model, resolve_config, serves_elsewhere, with_home
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.worker import WorkerSpec

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from tackroom.harness.tasks import TaskGraphs

__all__ = ["Harness"]


def _new_id(prefix: str) -> str:
    return f"{prefix}-{os.urandom(6).hex()}"


T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class Harness:
    """An agent harness on one engine: ``run`` / ``run_sync`` / ``stream`` a prompt.

    ``model`` is ``PROVIDER:MODEL`` (``openai:gpt-5-mini``, ``anthropic:…``, ``ollama:…``,
    ``scripted:NAME`` with ``script=``) — or a chain of them tried in order when a call fails
    with a transient or rate-limit error (``"openai:gpt-5-mini -> anthropic:claude-haiku-4-5"``)
    —, a model object (:class:`~tackroom.harness.models.
    StreamingModel`, ``tackroom.testing.FunctionModel``) or a provider object with a
    ``worker_spec()`` (``tackroom.testing.ScriptedProvider``); ``None`` takes ``agent.model`` of
    the config. ``config`` is a :class:`HarnessConfig`, a path, or ``None`` for ``./tackroom.yaml``
    (or the defaults). ``engine`` overrides the config's engine URL (``embedded:PATH``,
    ``nats://…``), or is an engine object not started yet (one a test wrapped or instrumented);
    the harness starts and closes it. ``home`` puts every file the harness keeps (engine,
    workspaces, vault, socket) under one directory.

    Safe by default: the built-in policy lets read-only tools and the program's own tools run,
    and asks (``on_approval``, or ``tackroom approve``) before writes, shell, code, HTTP and MCP
    tools; ``auto_approve=True`` answers yes for you (denials still hold), ``mode="plan"`` runs
    read-only tools only. ``principal`` (an id, or ``Principal(id=, roles=)``) is who the runs act
    for: the policy sees it, tools' ``required_permission`` is checked against its roles, and
    every gate decision names it. ``context`` sets the context budget (``context_window_limit``,
    ``reserve_tokens``, ``keep_last``, ``compact``, ``recall``; see docs/workers/compactor.md).
    """

    def __init__(
        self,
        model: str | StreamingModel | Any | None = None,
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
        self._tools_offered: list[str] | None = None
        self._host: Host | None = None
        self._bus: Engine | RemoteBus | None = None
        self._lock = asyncio.Lock()
        self._sync = SyncLoop(self.close)
        self._cursors: dict[str, int] = {}
        self._check_models = check_model
        self._models_checked: set[tuple[str, str]] = set()
        self._parked: dict[str, RunStream] = {}
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

    # -- configuration (before start) --------------------------------------------------------
    def _patterns(self) -> list[str]:
        if self._tool_patterns is None:
            self._tool_patterns = []
        return self._tool_patterns

    def _require_new(self, what: str) -> None:
        if self._bus is not None:
            raise UsageError(f"{what} must be set before the harness starts")

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
        spec = tool if isinstance(tool, ToolSpec) else ToolSpec.from_function(tool)
        self._require_new("tools")
        tools = self._brings.tools
        if spec.name in tools and tools[spec.name].function is not spec.function:
            raise UsageError(f"a tool named {spec.name!r} is registered already")
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

    @property
    def memory(self) -> BusMemory:
        """Long-term memory from this program: ``await harness.memory.save(text)``,
        ``await harness.memory.load(query)`` — through whatever serves it (the memory worker,
        or the adapter of :meth:`use_memory`)."""
        return BusMemory(self.bus)

    def set_tracer(self, tracer_provider: TracerProvider) -> None:
        self._require_new("the tracer provider")
        self._tracer_provider = tracer_provider

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The engine this harness hosts (not when it is attached to another process's)."""
        if self._host is None:
            if self._bus is not None:
                raise UsageError("the harness is attached to another process's engine")
            raise UsageError("the harness is not started: use `async with` or call start()")
        return self._host.engine

    @property
    def bus(self) -> Engine | RemoteBus:
        """What runs go through: the hosted engine, or another process's through its endpoint."""
        if self._bus is None:
            raise UsageError("the harness is not started: use `async with` or call start()")
        return self._bus

    @property
    def attached(self) -> bool:
        """Attached to the engine of another process (a ``tackroom serve``) through its socket."""
        return isinstance(self._bus, RemoteBus)

    @property
    def config(self) -> HarnessConfig:
        return self._config

    @property
    def tasks(self) -> TaskGraphs:
        """Task graphs on this harness: ``await harness.tasks.run("tasks.yaml")``."""
        from tackroom.harness.tasks import TaskGraphs

        return TaskGraphs(self)

    async def __aenter__(self) -> Harness:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Boot the workers (idempotent). When another process owns the embedded engine, attach
        to it through its local endpoint instead (``tackroom serve`` runs the workers)."""
        if self._bus is not None:
            return
        async with self._lock:
            if self._bus is not None:
                return
            embedded = self._engine_object is None and self._engine_url.startswith("embedded:")
            if self._attach_to is not False and embedded:
                self._bus = await self._attach()
                return
            host = build_host(
                self._config,
                self._brings,
                provider=self.provider,
                model_name=self.model,
                fallbacks=[*(ref.provider for ref in self.fallbacks), *self._extra_providers],
                engine_url=self._engine_url,
                engine=self._engine_object,
                tracer_provider=self._tracer_provider,
                serve_endpoint=self._serve_endpoint,
                bare=self._attach_to is not False,
            )
            try:
                await host.start()
            except EngineLocked:
                if self._engine_object is not None:
                    raise
                self._bus = await self._attach()
                return
            self._host, self._bus = host, host.engine

    async def _attach(self) -> RemoteBus:
        chosen = self._attach_to
        return await attach(
            self._config,
            self._brings,
            engine_url=self._engine_url,
            socket=Path(chosen) if isinstance(chosen, (str, Path)) else None,
        )

    async def close(self) -> None:
        async with self._lock:
            host, bus = self._host, self._bus
            self._host = self._bus = None
            for stream in list(self._parked.values()):
                await stream.aclose()
            self._parked.clear()
            if host is not None:
                await host.close()
            elif isinstance(bus, RemoteBus):
                await bus.close()

    # -- runs --------------------------------------------------------------------------------
    async def run(
        self,
        prompt: str | UserMessage,
        config: AgentConfig | Mapping[str, Any] | None = None,
        *,
        session: str | None = None,
        output_type: type[T] | None = None,
        instructions: str | None = None,
        max_turns: int | None = None,
        run_id: str | None = None,
        task: str | None = None,
    ) -> RunResult[Any]:
        """Run the agent on ``prompt`` to its end (or until a call waits for approval and no
        ``on_approval`` callback decides it: ``stop_reason == "awaiting_approval"``).

        ``config`` (an :class:`~tackroom.harness.agentconfig.AgentConfig`, seed 003's second
        argument) governs this run — model, prompts, tools, iterations, tool timeout, context
        window — over the harness's own; ``instructions``, ``max_turns`` and ``task`` given here
        win over it. ``run_id`` names the run (default: a fresh ``run-…``); the session's
        entries and the tool calls' ledger are keyed by it. ``task`` tags the run: a route of
        that name (``agent.routes``) chooses its model chain."""
        agent = as_agent_config(config)
        kind = output_type if output_type is not None else self._output_type
        schema = OutputSchema(kind) if kind is not None else None
        stream = await self._begin(
            prompt,
            session=session,
            instructions=self._instructions(instructions, agent),
            max_turns=max_turns,
            run_id=run_id,
            task=task,
            output=schema,
            agent=agent,
        )
        result = await self._finish(stream, return_when_parked=self.on_approval is None)
        return result if schema is None else typed(result, schema)

    def run_sync(
        self,
        prompt: str | UserMessage,
        config: AgentConfig | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> RunResult[Any]:
        """:meth:`run` from synchronous code; the harness keeps its own event loop between
        calls (close it with :meth:`close_sync` or a ``with`` block)."""
        return self._sync.run(self.run(prompt, config, **options))

    def stream(
        self,
        prompt: str | UserMessage,
        config: AgentConfig | Mapping[str, Any] | None = None,
        *,
        session: str | None = None,
        instructions: str | None = None,
        max_turns: int | None = None,
        run_id: str | None = None,
        task: str | None = None,
    ) -> RunStream:
        """The run's typed events as they happen (``async for event in harness.stream(...)``);
        ``RunStream.result`` once the run ended."""
        agent = as_agent_config(config)
        return RunStream.deferred(
            lambda: self._begin(
                prompt,
                session=session,
                instructions=self._instructions(instructions, agent),
                max_turns=max_turns,
                run_id=run_id,
                task=task,
                agent=agent,
            )
        )

    async def submit(
        self,
        prompt: str | UserMessage,
        *,
        session: str,
        run_id: str | None = None,
        if_busy: Literal["refuse", "queue"] = "refuse",
        instructions: str | None = None,
        max_turns: int | None = None,
        config: AgentConfig | Mapping[str, Any] | None = None,
    ) -> RunStartResponse:
        """Start a run and return ``run::start``'s answer without following it (``follow``,
        ``get_state`` and ``events`` see it afterwards; it runs whether or not anyone watches).

        A busy session refuses (``started`` is false, ``reason`` says why) — or, with
        ``if_busy="queue"``, takes ``prompt`` as a follow-up of the run in flight (``queued``)."""
        agent = as_agent_config(config)
        self._boot_models_of(agent)
        await self.start()
        request = self._request(
            UserMessage.text(prompt) if isinstance(prompt, str) else prompt,
            session_id=session,
            run_id=run_id or _new_id("run"),
            instructions=self._instructions(instructions, agent),
            max_turns=max_turns,
            if_busy=if_busy,
            agent=agent,
        )
        return await self._trigger_start(request)

    async def wait(self, result: RunResult[Any]) -> RunResult[Any]:
        """Follow a run that returned ``awaiting_approval`` to its next stop."""
        stream = self._parked.pop(result.run_id, None)
        if stream is None:
            stream = await self.follow(result.session_id)
        return await self._finish(stream, return_when_parked=self.on_approval is None)

    async def follow(self, session: str, *, after: int = 0) -> RunStream:
        """The run in flight on ``session`` (after a crash, say), from where its events stand.

        ``after``: the sequence of the last event a client saw (``RunStream.seq``); the stream
        starts with the event after it — a client reconnecting gets exactly what it missed (an
        answer streaming now, whose deltas are not stored, as a ``message_snapshot`` first)."""
        await self.start()
        state = await self.get_state(session)
        if state is None:
            raise UsageError(f"session {session!r} has no run")
        return await RunStream.open(
            self,
            session_id=session,
            run_id=state.run_id,
            prompt=None,
            after=after,
            snapshots=True,
        )

    async def get_state(self, session: str) -> TurnStateView | None:
        await self.start()
        return await TURN_GET_STATE.call(self.bus, TurnStateRequest(session_id=session))

    async def abort(self, session: str, *, reason: str = "aborted by the user") -> bool:
        await self.start()
        reply = await RUN_ABORT.call(self.bus, RunAbortRequest(session_id=session, reason=reason))
        return reply.aborted

    async def approve(self, pending: PendingApproval, *, always: bool = False) -> None:
        await self._decide(pending, "allow", always=always, reason=None)

    async def deny(self, pending: PendingApproval, *, reason: str | None = None) -> None:
        await self._decide(pending, "deny", always=False, reason=reason)

    async def _decide(
        self,
        pending: PendingApproval,
        decision: Literal["allow", "deny"],
        *,
        always: bool,
        reason: str | None,
    ) -> None:
        await decide(
            self.bus,
            session_id=pending.session_id,
            function_call_id=pending.function_call_id,
            function_id=pending.function_id,
            decision=decision,
            reason=reason,
            always=always,
            principal=self.principal,
        )

    async def check_provider(self) -> str | None:
        """What keeps the model's provider from answering (no key, no server), if it can tell."""
        await self.start()
        try:
            check = check_function(self.provider)
            reply = await check.call(self.bus, ProviderCheckRequest(), timeout=5.0)
        except (FunctionNotFound, EngineError, ValidationError):
            return None
        if not reply.ready:
            return reply.problem or f"provider {self.provider!r} is not ready"
        return None

    # -- the session's context ---------------------------------------------------------------
    async def pin(
        self, session: str, entry_id: str | None = None, *, text: str | None = None
    ) -> str:
        """Pin an entry of ``session`` (or ``text`` as a new rule entry, whose id is ``entry_id``
        when given): every later context carries it verbatim, whatever compaction summarises.
        Returns the pinned entry's id."""
        await self.start()
        return await pin_entry(self.bus, session, entry_id, text=text)

    async def unpin(self, session: str, entry_id: str) -> list[str]:
        """Unpin ``entry_id`` (nothing changes if it is not pinned); the ids still pinned."""
        await self.start()
        return await unpin_entry(self.bus, session, entry_id)

    async def compact(self, session: str) -> CompactResponse:
        """Summarise the oldest part of ``session`` now, with this harness's model, into a
        compaction entry naming what it replaces (pinned entries and the newest ``keep_last``
        stay whole). ``compacted`` is false, ``detail`` says why, when nothing can be."""
        await self.start()
        return await compact_session(
            self.bus,
            session,
            provider=self.provider,
            model=self.model,
            settings=self.context or self._config.agent.context,
            principal=self.principal,
        )

    def pin_sync(
        self, session: str, entry_id: str | None = None, *, text: str | None = None
    ) -> str:
        return self._sync.run(self.pin(session, entry_id, text=text))

    def unpin_sync(self, session: str, entry_id: str) -> list[str]:
        return self._sync.run(self.unpin(session, entry_id))

    def compact_sync(self, session: str) -> CompactResponse:
        return self._sync.run(self.compact(session))

    # -- internals ---------------------------------------------------------------------------
    def _instructions(self, extra: str | None, agent: AgentConfig | None = None) -> str | None:
        """The harness's instructions (an agent config's instead, when it has some), then the
        run's."""
        own = agent.instructions if agent is not None and agent.instructions else self.instructions
        parts = [p for p in (own, extra) if p]
        return "\n\n".join(parts) or None

    def _offered(self) -> list[str]:
        """:meth:`_tool_list`, computed once: tools are fixed when the harness starts."""
        if self._tools_offered is None:
            self._tools_offered = self._tool_list()
        return self._tools_offered

    def _tool_list(self) -> list[str]:
        """The functions offered: ``tools=`` patterns and registered tools; a config file's
        ``agent.tools`` only when it sets them (the facade offers no built-in tool unasked)."""
        agent = self._config.agent
        configured = agent.tools if "tools" in agent.model_fields_set else []
        patterns = list(configured if self._tool_patterns is None else [])
        patterns.extend(self._tool_patterns or [])
        patterns.extend(tool.function_id for tool in self._brings.tools.values())
        patterns.extend(self._memory_tools)
        patterns.extend(f"{AGENT_PREFIX}{agent.name}" for agent in self._config.agents)
        return list(dict.fromkeys(patterns))

    async def _begin(
        self,
        prompt: str | UserMessage,
        *,
        session: str | None,
        instructions: str | None,
        max_turns: int | None,
        run_id: str | None = None,
        task: str | None = None,
        output: OutputSchema[Any] | None = None,
        agent: AgentConfig | None = None,
    ) -> RunStream:
        self._boot_models_of(agent)
        await self.start()
        session_id = session or _new_id("s")
        run_id = run_id or _new_id("run")
        message = UserMessage.text(prompt) if isinstance(prompt, str) else prompt
        request = self._request(
            message,
            session_id=session_id,
            run_id=run_id,
            instructions=instructions,
            max_turns=max_turns,
            task=task,
            output=output,
            agent=agent,
        )
        stream = await RunStream.open(
            self,
            session_id=session_id,
            run_id=run_id,
            prompt=message,
            after=self._cursors.get(session_id, 0),
        )
        try:
            reply = await self._trigger_start(request)
        except BaseException:
            await stream.aclose()
            raise
        if not reply.started:
            await stream.aclose()
            raise SessionBusy(session_id, reply.reason or "the session has a run in flight")
        if reply.resumed:
            # The run existed (a retried start): follow it from the session's first event, so
            # its result is whole even if this client saw part of it already.
            await stream.aclose()
            stream = await RunStream.open(
                self, session_id=session_id, run_id=run_id, prompt=message, after=0, snapshots=True
            )
        return stream

    def _request(
        self,
        message: UserMessage,
        *,
        session_id: str,
        run_id: str,
        instructions: str | None,
        max_turns: int | None,
        if_busy: Literal["refuse", "queue"] = "refuse",
        task: str | None = None,
        output: OutputSchema[Any] | None = None,
        agent: AgentConfig | None = None,
    ) -> RunStartRequest:
        request = RunStartRequest(
            session_id=session_id,
            run_id=run_id,
            provider=self.provider,
            model=self.model,
            mode=self.mode,
            principal=self.principal,
            messages=[message],
            max_turns=max_turns or self.max_turns,
            tools=self._offered(),
            instructions=instructions,
            if_busy=if_busy,
            context=self.context,
            fallbacks=list(self.fallbacks),
            task=task,
            output_schema=None if output is None else output.schema,
            output_name=None if output is None else output.name,
            output_retries=None if output is None else self.output_retries,
        )
        if agent is None:
            return request
        context = self._config.agent.context
        registered = self._brings.tools.keys()
        configured_request = configured(request, agent, registered=registered, context=context)
        # What the call itself says wins over the config; the instructions are composed already.
        given = {"instructions": True, "max_turns": bool(max_turns), "task": task is not None}
        kept = {name: getattr(request, name) for name, wins in given.items() if wins}
        return configured_request.model_copy(update=kept)

    def _boot_models_of(self, agent: AgentConfig | None) -> None:
        """Before the harness starts, the providers an agent config names join the boot list
        (on a harness already started, a config's model must be one it booted)."""
        if agent is None or self._bus is not None:
            return
        booted = {self.provider, *(ref.provider for ref in self.fallbacks)}
        for ref in agent.models() or ():
            if ref.provider not in booted and ref.provider not in self._extra_providers:
                self._extra_providers.append(ref.provider)

    async def _trigger_start(self, request: RunStartRequest) -> RunStartResponse:
        if self._check_models:
            # Every model of the chain: a misspelt fallback would only show when it is needed.
            # Each once: a harness's own chain, and the chains of the configs its runs name.
            chain = [(request.provider, request.model)]
            chain.extend((ref.provider, ref.model) for ref in request.fallbacks)
            for provider, model in chain:
                if (provider, model) in self._models_checked:
                    continue
                if not serves_elsewhere(self._config, provider):
                    problem = await unknown_model_problem(self.bus, provider, model)
                    if problem is not None:
                        raise UsageError(problem)
                self._models_checked.add((provider, model))
        return await RUN_START.call(self.bus, request)

    async def _finish(self, stream: RunStream, *, return_when_parked: bool) -> RunResult[Any]:
        """Fold the run into its result; a parked run's stream stays open for :meth:`wait`."""
        try:
            await stream.fold(return_when_parked=return_when_parked)
        finally:
            if stream.parked:
                self._parked[stream.run_id] = stream
            else:
                await stream.aclose()
        return stream.result

    def forget_parked(self, run_id: str) -> None:
        self._parked.pop(run_id, None)

    def note_cursor(self, session_id: str, seq: int) -> None:
        if seq > self._cursors.get(session_id, 0):
            self._cursors[session_id] = seq

    # -- sync use ----------------------------------------------------------------------------
    def close_sync(self) -> None:
        """Close the harness from synchronous code (what a ``with`` block does on exit)."""
        self._sync.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *_: object) -> None:
        self.close_sync()

    def events(self, session: str, *, after: int = 0) -> AsyncIterator[tuple[int, Any]]:
        """Every typed event of ``session`` from ``after`` on (stored, then live)."""
        return EVENTS.events(self.engine, session, after=after)

    def events_tree(
        self, session: str, *, after: int = 0, run_id: str | None = None
    ) -> AsyncIterator[Any]:
        """The run's typed events and its subagents' (each names its session), as they come,
        until the run and every child it started have ended (:mod:`tackroom.harness.tree`)."""
        return follow_tree(self.engine, session, after=after, run_id=run_id)


def _listed(script: Sequence[Any] | None) -> list[Any] | None:
    return None if script is None else list(script)
