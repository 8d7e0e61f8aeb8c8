"""Starting and following the runs of one harness: the ``run::start`` request its options make,
the stream that follows the run, and what the harness remembers between runs.

:class:`Launcher` is what :class:`~tackroom.harness.runs.RunStream` reports to (the
:class:`~tackroom.harness.runs.RunHost`): the last event sequence seen per session (a next run
subscribes from there), the streams of runs parked for approval (``Harness.wait`` picks them up),
the models already checked against the catalog, and the tools registered after the start
(served from the next run on).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from typing import Any, Literal, Protocol

from tackroom.contracts.context import ContextSettings
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.principal import Principal
from tackroom.contracts.turn import (
    RUN_START,
    Mode,
    ModelRef,
    RunStartRequest,
    RunStartResponse,
    TurnStateView,
)
from tackroom.engine.protocol import Engine, Handler, Registration
from tackroom.harness.agentconfig import AgentConfig, configured
from tackroom.harness.approvals import Approvals
from tackroom.harness.errors import UsageError
from tackroom.harness.modelcheck import unknown_model_problem
from tackroom.harness.output import OutputSchema
from tackroom.harness.remote import RemoteBus
from tackroom.harness.result import PendingApproval, RunResult
from tackroom.harness.runs import ApprovalCallback, RunStream, SessionBusy
from tackroom.harness.tools import ToolSpec, serve_tools
from tackroom.harness.wiring import serves_elsewhere
from tackroom.runtime.config import HarnessConfig

__all__ = ["LaunchHost", "Launcher", "new_id"]

LATE_TOOLS_WORKER = "harness-tools"
"""The worker name a tool registered after the start is served under (the tools worker's)."""


def new_id(prefix: str) -> str:
    return f"{prefix}-{os.urandom(6).hex()}"


class LaunchHost(Protocol):
    """What a :class:`Launcher` reads of its harness (``Harness`` is one): the options a run
    starts with, and the bus it runs on."""

    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def fallbacks(self) -> Sequence[ModelRef]: ...
    @property
    def mode(self) -> Mode: ...
    @property
    def max_turns(self) -> int: ...
    @property
    def instructions(self) -> str | None: ...
    @property
    def principal(self) -> Principal | None: ...
    @property
    def context(self) -> ContextSettings | None: ...
    @property
    def output_retries(self) -> int: ...
    @property
    def on_approval(self) -> ApprovalCallback | None: ...
    @property
    def config(self) -> HarnessConfig: ...
    @property
    def bus(self) -> Engine | RemoteBus: ...
    @property
    def approvals(self) -> Approvals: ...
    @property
    def offered_tools(self) -> list[str]: ...
    @property
    def tool_names(self) -> Collection[str]: ...

    async def start(self) -> None: ...

    async def get_state(self, session: str) -> TurnStateView | None: ...


class Launcher:
    """The runs of one harness (see the module's docstring)."""

    def __init__(
        self, harness: LaunchHost, *, check_models: bool, late_tools: list[ToolSpec]
    ) -> None:
        """``late_tools``: the harness's list of tools registered after its start, which the
        next run's start serves (and empties)."""
        self._harness = harness
        self._check_models = check_models
        self._checked: set[tuple[str, str]] = set()
        self._cursors: dict[str, int] = {}
        self._parked: dict[str, RunStream] = {}
        self._late = late_tools
        self._registrations: list[Registration] = []

    # -- what a RunStream reports to (RunHost) ------------------------------------------------
    @property
    def on_approval(self) -> ApprovalCallback | None:
        return self._harness.on_approval

    @property
    def bus(self) -> Engine | RemoteBus:
        return self._harness.bus

    def note_cursor(self, session_id: str, seq: int) -> None:
        if seq > self._cursors.get(session_id, 0):
            self._cursors[session_id] = seq

    def forget_parked(self, run_id: str) -> None:
        self._parked.pop(run_id, None)

    async def get_state(self, session: str) -> TurnStateView | None:
        return await self._harness.get_state(session)

    async def approve(self, pending: PendingApproval, *, always: bool = False) -> None:
        await self._harness.approvals.approve(pending, always=always)

    async def deny(self, pending: PendingApproval, *, reason: str | None = None) -> None:
        await self._harness.approvals.deny(pending, reason=reason)

    # -- tools registered after the start -----------------------------------------------------
    async def _serve_late_tools(self) -> None:
        if not self._late:
            return
        engine = self._harness.bus
        if isinstance(engine, RemoteBus):  # refused when registered; attached since?
            raise UsageError("tools defined in Python need an engine of their own")
        tools = list(self._late)
        self._late.clear()

        async def register(function_id: str, handler: Handler, **options: Any) -> Registration:
            return await engine.register_function(
                function_id, handler, worker=LATE_TOOLS_WORKER, **options
            )

        self._registrations.extend(await serve_tools(register, tools))

    # -- starting a run ------------------------------------------------------------------------
    def instructions(self, extra: str | None, agent: AgentConfig | None = None) -> str | None:
        """The harness's instructions (an agent config's instead, when it has some), then the
        run's."""
        harness = self._harness
        own = agent.instructions if agent is not None and agent.instructions else None
        parts = [p for p in (own or harness.instructions, extra) if p]
        return "\n\n".join(parts) or None

    async def begin(
        self,
        prompt: str | UserMessage,
        *,
        session: str | None,
        run_id: str | None,
        instructions: str | None,
        max_turns: int | None,
        task: str | None = None,
        output: OutputSchema[Any] | None = None,
        agent: AgentConfig | None = None,
    ) -> RunStream:
        """Start a run and the stream that follows it (opened first: no event is missed)."""
        await self._harness.start()
        session_id = session or new_id("s")
        run_id = run_id or new_id("run")
        message = UserMessage.text(prompt) if isinstance(prompt, str) else prompt
        request = self.request(
            message,
            session_id=session_id,
            run_id=run_id,
            instructions=instructions,
            max_turns=max_turns,
            task=task,
            output=output,
            agent=agent,
        )
        after = self._cursors.get(session_id, 0)
        stream = await RunStream.open(
            self, session_id=session_id, run_id=run_id, prompt=message, after=after
        )
        try:
            reply = await self.trigger_start(request)
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

    def request(
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
        """The ``run::start`` request of a run with the harness's options (an agent config's
        where it sets them; what the call itself says wins over both)."""
        harness = self._harness
        request = RunStartRequest(
            session_id=session_id,
            run_id=run_id,
            provider=harness.provider,
            model=harness.model,
            mode=harness.mode,
            principal=harness.principal,
            messages=[message],
            max_turns=max_turns or harness.max_turns,
            tools=harness.offered_tools,
            instructions=instructions,
            if_busy=if_busy,
            context=harness.context,
            fallbacks=list(harness.fallbacks),
            task=task,
            output_schema=None if output is None else output.schema,
            output_name=None if output is None else output.name,
            output_retries=None if output is None else harness.output_retries,
        )
        if agent is None:
            return request
        context = harness.config.agent.context
        chosen = configured(request, agent, registered=harness.tool_names, context=context)
        # What the call itself says wins over the config; the instructions are composed already.
        given = {"instructions": True, "max_turns": bool(max_turns), "task": task is not None}
        kept = {name: getattr(request, name) for name, wins in given.items() if wins}
        return chosen.model_copy(update=kept)

    async def trigger_start(self, request: RunStartRequest) -> RunStartResponse:
        """``run::start``, once every model of the request's chain is known to the catalog (each
        checked once: a misspelt fallback would only show when it is needed)."""
        await self._serve_late_tools()
        harness = self._harness
        chain = [(request.provider, request.model)]
        chain.extend((ref.provider, ref.model) for ref in request.fallbacks)
        for provider, model in chain if self._check_models else ():
            if (provider, model) in self._checked:
                continue
            if not serves_elsewhere(harness.config, provider):
                problem = await unknown_model_problem(harness.bus, provider, model)
                if problem is not None:
                    raise UsageError(problem)
            self._checked.add((provider, model))
        return await RUN_START.call(harness.bus, request)

    async def finish(self, stream: RunStream, *, return_when_parked: bool) -> RunResult[Any]:
        """Fold the run into its result; a parked run's stream stays open for :meth:`parked`."""
        try:
            await stream.fold(return_when_parked=return_when_parked)
        finally:
            if stream.parked:
                self._parked[stream.run_id] = stream
            else:
                await stream.aclose()
        return stream.result

    def parked(self, run_id: str) -> RunStream | None:
        """The open stream of a run that returned parked (taken: a second call gets none)."""
        return self._parked.pop(run_id, None)

    async def close(self) -> None:
        """Close the parked runs' streams and unserve the tools registered after the start."""
        for stream in list(self._parked.values()):
            await stream.aclose()
        self._parked.clear()
        registrations, self._registrations = self._registrations, []
        for registration in reversed(registrations):
            await registration.unregister()
