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
the policy) changes the boot list, not this class. What a program does to sessions and to calls
waiting for approval lives on two handles, :attr:`Harness.sessions` and
:attr:`Harness.approvals`; building and following runs, in :mod:`tackroom.harness.launch`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import ValidationError

from tackroom.contracts.events import EVENTS
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.provider import ProviderCheckRequest, check_function
from tackroom.contracts.turn import (
    RUN_ABORT,
    TURN_GET_STATE,
    RunAbortRequest,
    RunStartResponse,
    TurnStateRequest,
    TurnStateView,
)
from tackroom.engine.errors import EngineError, EngineLocked, FunctionNotFound
from tackroom.engine.protocol import Engine
from tackroom.harness.agentconfig import AgentConfig
from tackroom.harness.approvals import Approvals
from tackroom.harness.boot import attach, build_host
from tackroom.harness.errors import UsageError
from tackroom.harness.launch import Launcher, new_id
from tackroom.harness.memory_adapter import BusMemory
from tackroom.harness.output import OutputSchema, typed
from tackroom.harness.remote import RemoteBus
from tackroom.harness.result import RunResult
from tackroom.harness.runs import RunStream
from tackroom.harness.sessions import Sessions
from tackroom.harness.setup import HarnessSetup
from tackroom.harness.syncing import SyncLoop
from tackroom.harness.tree import follow_tree

if TYPE_CHECKING:
    from tackroom.harness.tasks import TaskGraphs

__all__ = ["Harness"]

T = TypeVar("T")


class Harness(HarnessSetup):
    """An agent harness on one engine: ``run`` / ``run_sync`` / ``stream`` a prompt; the
    options are :class:`~tackroom.harness.setup.HarnessSetup`'s."""

    # -- handles --------------------------------------------------------------------------------
    @cached_property
    def sessions(self) -> Sessions:
        """The sessions of this harness's engine: ``list``, ``get``, ``messages``, ``tree``,
        ``fork``, ``delete``, ``pin``, ``unpin``, ``compact``."""
        return Sessions(self)

    @cached_property
    def approvals(self) -> Approvals:
        """The calls waiting for a decision: ``pending``, ``approve``, ``deny``."""
        return Approvals(self)

    @cached_property
    def _launcher(self) -> Launcher:
        return Launcher(self, check_models=self._check_models, late_tools=self._late_tools)

    @cached_property
    def _lock(self) -> asyncio.Lock:
        return asyncio.Lock()

    @cached_property
    def _sync(self) -> SyncLoop:
        return SyncLoop(self.close)

    @property
    def memory(self) -> BusMemory:
        """Long-term memory from this program: ``await harness.memory.save(text)``,
        ``await harness.memory.load(query)`` — through whatever serves it (the memory worker,
        or the adapter of :meth:`use_memory`)."""
        return BusMemory(self.bus)

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
    def tasks(self) -> TaskGraphs:
        """Task graphs on this harness: ``await harness.tasks.run("tasks.yaml")``."""
        from tackroom.harness.tasks import TaskGraphs

        return TaskGraphs(self)

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> Harness:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *_: object) -> None:
        self.close_sync()

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
        socket = Path(chosen) if isinstance(chosen, (str, Path)) else None
        return await attach(self._config, self._brings, engine_url=self._engine_url, socket=socket)

    async def close(self) -> None:
        async with self._lock:
            host, bus = self._host, self._bus
            self._host = self._bus = None
            await self._launcher.close()
            if host is not None:
                await host.close()
            elif isinstance(bus, RemoteBus):
                await bus.close()

    def sync(self, call: Coroutine[Any, Any, T]) -> T:
        """Run one of the harness's coroutines from synchronous code, on the harness's own event
        loop (kept between calls: the workers live on it): ``harness.sync(harness.sessions.
        list())``. Close it with :meth:`close_sync` or a ``with`` block."""
        return self._sync.run(call)

    def close_sync(self) -> None:
        """Close the harness, then its event loop, from synchronous code (a ``with`` block's
        exit)."""
        self._sync.close()

    # -- runs -------------------------------------------------------------------------------------
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
        agent = self._agent_config(config)
        kind = output_type if output_type is not None else self._output_type
        schema = OutputSchema(kind) if kind is not None else None
        stream = await self._launcher.begin(
            prompt,
            session=session,
            run_id=run_id,
            instructions=self._launcher.instructions(instructions, agent),
            max_turns=max_turns,
            task=task,
            output=schema,
            agent=agent,
        )
        result = await self._launcher.finish(stream, return_when_parked=self.on_approval is None)
        return result if schema is None else typed(result, schema)

    def run_sync(
        self,
        prompt: str | UserMessage,
        config: AgentConfig | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> RunResult[Any]:
        """:meth:`run` from synchronous code (:meth:`sync` of it)."""
        return self.sync(self.run(prompt, config, **options))

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
        agent = self._agent_config(config)
        launcher = self._launcher
        return RunStream.deferred(
            lambda: launcher.begin(
                prompt,
                session=session,
                run_id=run_id,
                instructions=launcher.instructions(instructions, agent),
                max_turns=max_turns,
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
        agent = self._agent_config(config)
        await self.start()
        request = self._launcher.request(
            UserMessage.text(prompt) if isinstance(prompt, str) else prompt,
            session_id=session,
            run_id=run_id or new_id("run"),
            instructions=self._launcher.instructions(instructions, agent),
            max_turns=max_turns,
            if_busy=if_busy,
            agent=agent,
        )
        return await self._launcher.trigger_start(request)

    async def wait(self, result: RunResult[Any]) -> RunResult[Any]:
        """Follow a run that returned ``awaiting_approval`` to its next stop."""
        stream = self._launcher.parked(result.run_id) or await self.follow(result.session_id)
        return await self._launcher.finish(stream, return_when_parked=self.on_approval is None)

    async def follow(self, session: str, *, after: int = 0) -> RunStream:
        """The run in flight on ``session`` (after a crash, say), from where its events stand.

        ``after``: the sequence of the last event a client saw (``RunStream.seq``); the stream
        starts with the event after it — a client reconnecting gets exactly what it missed (an
        answer streaming now, whose deltas are not stored, as a ``message_snapshot`` first)."""
        state = await self.get_state(session)
        if state is None:
            raise UsageError(f"session {session!r} has no run")
        return await RunStream.open(
            self._launcher,
            session_id=session,
            run_id=state.run_id,
            prompt=None,
            after=after,
            snapshots=True,
        )

    async def get_state(self, session: str) -> TurnStateView | None:
        """The turn of ``session``'s latest run (its state, the calls it parked), if any."""
        await self.start()
        return await TURN_GET_STATE.call(self.bus, TurnStateRequest(session_id=session))

    async def abort(self, session: str, *, reason: str = "aborted by the user") -> bool:
        """Stop the run in flight on ``session``; false when none was."""
        await self.start()
        reply = await RUN_ABORT.call(self.bus, RunAbortRequest(session_id=session, reason=reason))
        return reply.aborted

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

    def events(self, session: str, *, after: int = 0) -> AsyncIterator[tuple[int, Any]]:
        """Every typed event of ``session`` from ``after`` on (stored, then live)."""
        return EVENTS.events(self.engine, session, after=after)

    def events_tree(
        self, session: str, *, after: int = 0, run_id: str | None = None
    ) -> AsyncIterator[Any]:
        """The run's typed events and its subagents' (each names its session), as they come,
        until the run and every child it started have ended (:mod:`tackroom.harness.tree`)."""
        return follow_tree(self.engine, session, after=after, run_id=run_id)

    # -- an older name, until every caller uses the handle --------------------------------------
