"""Building blocks of the turn's reliability tests: test tools, a harness on ``tackroom.Harness``,
readers.

:func:`running_harness` boots the front door (``tackroom.Harness``: the workers ``tackroom run``
boots) with a scripted provider and the test tools; both the crash child process
(``crash_harness.py``) and the in-process tests use the facade. A fake policy worker
(:class:`FakePolicy`) stands in for the gate. Where a test reads or writes what no client API
offers (a state scope, the raw event stream, a blocked call), it goes through ``harness.engine``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tackroom import Harness
from tackroom.contracts.approvals import DECISIONS_SCOPE
from tackroom.contracts.events import EVENTS
from tackroom.contracts.tools import CallContext
from tackroom.contracts.turn import RunStartResponse, TurnStateView
from tackroom.engine import (
    Engine,
    FunctionError,
    Handler,
    Registration,
    StreamRecord,
    open_engine,
)
from tackroom.runtime import (
    HarnessConfig,
    WorkerConfig,
    WorkerContext,
    WorkerSpec,
)
from tackroom.runtime.tools import register_tool
from tackroom.testing import MEMORY_URL, Script, ScriptedProvider, wait_until
from tackroom.workers.orchestrator.record import TURNS_SCOPE, TurnRecord

__all__ = [
    "POLICY",
    "RECORD",
    "TOOLS",
    "TOUCH",
    "FakePolicy",
    "Hold",
    "RecordTools",
    "RunningHarness",
    "SpecModel",
    "approve",
    "event_types",
    "events_of",
    "harness_config",
    "install_holds",
    "messages_of",
    "policy_harness",
    "record_call",
    "roles",
    "running_harness",
    "text",
    "turn_of",
    "wait_for_state",
    "wait_for_terminal",
]

RECORD = "test::record"
"""Appends one line to the side-effect file; NOT idempotent (never retried after a crash)."""
TOUCH = "test::touch"
"""The same side effect, declared idempotent (retried after a crash)."""


class NoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = Field(min_length=1, max_length=100)


class NoteResult(BaseModel):
    schema_version: int = 1
    recorded: str


class _NoConfig(WorkerConfig):
    pass


class RecordTools:
    """``test::record`` and ``test::touch``: append ``<function> <session> <call> <note>`` to
    ``path`` (the side effect a test counts), then answer ``{"recorded": note}``.

    With ``hold`` set, a call waits for that event after writing its line — a slow tool; an event
    nobody sets blocks until the process is killed. ``on_hold`` is called when a call starts
    waiting.
    """

    def __init__(
        self,
        path: Path,
        *,
        hold: asyncio.Event | None = None,
        on_hold: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.hold = hold
        self.on_hold = on_hold
        self.waiting = 0
        """Calls waiting for ``hold`` now."""

    def lines(self) -> list[str]:
        """The side effects so far, one per call that ran."""
        return self.path.read_text().splitlines() if self.path.exists() else []

    def _write(self, line: str) -> None:
        # One write(2) in append mode: it lands whole, and survives a SIGKILL right after it.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def worker_spec(self, name: str = "test-tools") -> WorkerSpec[Any]:
        async def start(ctx: WorkerContext[_NoConfig]) -> None:
            for function_id, idempotent in ((RECORD, False), (TOUCH, True)):
                await register_tool(
                    ctx,
                    function_id,
                    self._handler(function_id),
                    request_model=NoteRequest,
                    response_model=NoteResult,
                    description=f"Record a note ({'' if idempotent else 'not '}idempotent).",
                    idempotent=idempotent,
                    parallel=False,
                )

        description = "Tools with a countable side effect."
        return WorkerSpec(name=name, description=description, config_model=_NoConfig, start=start)

    def _handler(
        self, function_id: str
    ) -> Callable[[NoteRequest, CallContext | None], Awaitable[NoteResult]]:
        async def handle(request: NoteRequest, call: CallContext | None) -> NoteResult:
            session = call.session_id if call else "-"
            call_id = call.function_call_id if call else "-"
            self._write(f"{function_id} {session} {call_id} {request.note}\n")
            if self.hold is not None:
                if self.on_hold is not None:
                    self.on_hold(function_id)
                self.waiting += 1
                try:
                    await self.hold.wait()
                finally:
                    self.waiting -= 1
            return NoteResult(recorded=request.note)

        return handle


@dataclass(frozen=True, slots=True)
class Hold:
    """Block calls of ``function_id`` whose payload ``match``es, forever: a kill point."""

    name: str
    function_id: str
    match: Callable[[Any], bool] = lambda payload: True


def install_holds(
    engine: Engine, holds: Sequence[Hold], *, on_hold: Callable[[str], None] = lambda name: None
) -> None:
    """Wrap the handlers of held function ids as the workers register them (before the host
    starts). A held call calls ``on_hold(hold.name)`` and waits until cancelled or killed."""
    register = engine.register_function

    async def register_function(function_id: str, handler: Handler, **options: Any) -> Registration:
        for hold in holds:
            if hold.function_id == function_id:
                handler = _holding(handler, hold, on_hold)
        return await register(function_id, handler, **options)

    setattr(engine, "register_function", register_function)  # noqa: B010


def _holding(handler: Handler, hold: Hold, on_hold: Callable[[str], None]) -> Handler:
    async def held(payload: Any) -> Any:
        if hold.match(payload):
            on_hold(hold.name)
            await asyncio.get_running_loop().create_future()
        return await handler(payload)

    return held


TOOLS = ["test::*", "calc::*"]
"""What the model is offered in these tests."""


def harness_config(
    workdir: Path,
    *,
    scripted: dict[str, Any] | None = None,
    orchestrator: dict[str, Any] | None = None,
) -> HarnessConfig:
    sections: dict[str, dict[str, Any] | None] = {
        "files": {"workspace_root": str(workdir / "workspaces")},
        "audit": {"path": str(workdir / "audit.db")},
        # Thin unless a test names a gate: these tests are about durability, and the test tools
        # would otherwise ask a person under the default policy.
        "orchestrator": {
            "cwd": str(workdir),
            "policy_function": None,
            "approvals_function": None,
            **(orchestrator or {}),
        },
    }
    if scripted is not None:
        sections["scripted"] = scripted
    return HarnessConfig(schema_version=1, worker_config=sections)


async def turn_of(engine: Engine, session_id: str) -> TurnRecord | None:
    """The orchestrator's own record of the session's turn, read from its state scope (what a
    killed harness left behind, the tools it offered: more than ``turn::get_state`` shows)."""
    entry = await engine.get_state(TURNS_SCOPE, session_id)
    return None if entry is None else TurnRecord.model_validate(entry.value)


def _front(harness: RunningHarness | Harness) -> Harness:
    return harness.facade if isinstance(harness, RunningHarness) else harness


async def wait_for_terminal(
    harness: RunningHarness | Harness, session_id: str, *, timeout: float = 10
) -> TurnStateView:
    """The session's turn (``turn::get_state``) once it is ``stopped`` or ``failed``: committed,
    which ``agent_end`` is not yet (it is emitted just before the final commit)."""
    front = _front(harness)
    latest: list[TurnStateView | None] = [None]

    async def terminal() -> bool:
        latest[0] = view = await front.get_state(session_id)
        return view is not None and view.state in ("stopped", "failed")

    def state() -> str:
        view = latest[0]
        return f"the turn of {session_id} ends (now: {view and view.state})"

    await wait_until(terminal, timeout=timeout, message=state)
    assert latest[0] is not None
    return latest[0]


async def wait_for_state(harness: RunningHarness | Harness, session_id: str, state: str) -> None:
    front = _front(harness)

    async def reached() -> bool:
        view = await front.get_state(session_id)
        return view is not None and view.state == state

    await wait_until(reached, message=f"{session_id} reaches {state}")


async def events_of(engine: Engine, session_id: str, *, after: int = 0) -> list[StreamRecord]:
    """The session's ``agent::events`` as stored (sequence and JSON), oldest first."""
    return await engine.read(EVENTS.name, session_id, after=after, limit=100_000)


async def messages_of(engine: Engine, session_id: str) -> list[dict[str, Any]]:
    """The session's active path (``session-tree::messages``): ``[{entry_id, type, message}]``."""
    reply = await engine.trigger("session-tree::messages", {"session_id": session_id})
    items: list[dict[str, Any]] = reply["messages"]
    return items


def text(message: Mapping[str, Any]) -> str:
    """The text blocks of a message (as JSON), joined by spaces."""
    return " ".join(b.get("text", "") for b in message["content"] if isinstance(b, dict))


def roles(messages: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(entry_id, role)`` of each entry."""
    return [(m["entry_id"], m["message"]["role"]) for m in messages]


@dataclass
class RunningHarness:
    """``tackroom.Harness`` (``facade``) with its scripted provider and test tools."""

    facade: Harness
    provider: ScriptedProvider
    tools: RecordTools
    held: list[str]
    """Names of the holds reached (see :func:`install_holds`)."""

    @property
    def engine(self) -> Engine:
        return self.facade.engine

    async def start(
        self,
        session_id: str,
        text: str = "go",
        *,
        run_id: str | None = None,
        if_busy: Literal["refuse", "queue"] = "refuse",
        max_turns: int | None = None,
    ) -> RunStartResponse:
        """Start a run with ``text`` as the user message, without following it."""
        return await self.facade.submit(
            text, session=session_id, run_id=run_id, if_busy=if_busy, max_turns=max_turns
        )

    async def run(
        self,
        session_id: str,
        text: str = "go",
        *,
        run_id: str | None = None,
        max_turns: int | None = None,
    ) -> TurnStateView:
        """Run to the end through the facade; the turn as committed then."""
        result = await self.facade.run(text, session=session_id, run_id=run_id, max_turns=max_turns)
        view = await wait_for_terminal(self, session_id)
        assert (view.run_id, view.state, view.stop_reason) == (
            result.run_id,
            result.state,
            result.stop_reason,
        ), result
        return view


@asynccontextmanager
async def running_harness(
    workdir: Path,
    script: Script,
    *,
    url: str = MEMORY_URL,
    per_session: bool = True,
    orchestrator: dict[str, Any] | None = None,
    hold: asyncio.Event | None = None,
    holds: Sequence[Hold] = (),
    extra: Sequence[WorkerSpec[Any]] = (),
    model: Any = None,
    engine: Engine | None = None,
) -> AsyncIterator[RunningHarness]:
    """``tackroom.Harness`` on ``url`` (engine, sessions, orchestrator, files, utilities, …), a
    scripted provider (transcript cursor) as its model, and the test tools (their side effects
    in ``workdir``), plus ``extra``; the model is offered :data:`TOOLS`.

    ``hold``: the test tools wait for it; ``holds``: calls blocked until the harness closes (a
    clean shutdown there is a crash for the blocked step: it is not acknowledged).
    ``model``: the facade's model instead of the scripted provider (which is then not served).
    ``engine``: an unstarted engine object to run on instead of opening ``url``.
    """
    scripted = ScriptedProvider(script, per_session=per_session, cursor="transcript")
    tools = RecordTools(workdir / "side_effects.log", hold=hold)
    held: list[str] = []
    bus: str | Engine = url if engine is None else engine
    if holds:
        bus = open_engine(url) if engine is None else engine
        install_holds(bus, holds, on_hold=held.append)
    facade = Harness(
        scripted if model is None else model,
        config=harness_config(workdir, orchestrator=orchestrator),
        engine=bus,
        tools=TOOLS,
        workers=[tools.worker_spec(), *extra],
    )
    async with facade:
        yield RunningHarness(facade=facade, provider=scripted, tools=tools, held=held)


@dataclass(frozen=True, slots=True)
class SpecModel:
    """A model for ``tackroom.Harness``: provider ``name``, served by the worker ``spec`` (a
    wrapped provider worker, or one that serves nothing)."""

    name: str
    spec: WorkerSpec[Any]

    def worker_spec(self) -> WorkerSpec[Any]:
        return self.spec


# -- the gate ----------------------------------------------------------------------------------
POLICY = "policy::check_permissions"


class FakePolicy:
    """``policy::check_permissions``: a decision per function id (default allow), or broken."""

    def __init__(self, decisions: Mapping[str, str] | None = None, *, mode: str = "answer") -> None:
        self.decisions = dict(decisions or {})
        self.mode = mode
        self.requests: list[Any] = []

    async def check(self, payload: Any) -> Any:
        self.requests.append(payload)
        if self.mode == "raise":
            raise FunctionError("rules_unavailable", "the rule store is down")
        if self.mode == "hang":
            await asyncio.get_running_loop().create_future()
        if self.mode == "garbage":
            return {"verdict": "sure"}
        decision = self.decisions.get(payload["function_id"], "allow")
        return {
            "decision": decision,
            "rule_id": f"rule-{decision}",
            "reason": f"policy: {decision}",
        }

    def worker_spec(self) -> WorkerSpec[Any]:
        async def start(ctx: WorkerContext[_NoConfig]) -> None:
            await ctx.register_function(POLICY, self.check, description="Fake policy.")

        return WorkerSpec(
            name="policy", description="A fake policy.", config_model=_NoConfig, start=start
        )


def policy_harness(
    tmp_path: Path, script: Script, policy: FakePolicy, **options: Any
) -> AbstractAsyncContextManager[RunningHarness]:
    """:func:`running_harness` with ``policy`` booted and configured as the gate."""
    orchestrator = {"policy_function": POLICY, **options.pop("orchestrator", {})}
    return running_harness(
        tmp_path, script, orchestrator=orchestrator, extra=[policy.worker_spec()], **options
    )


async def event_types(harness: RunningHarness, session_id: str) -> list[str]:
    return [r.data["type"] for r in await events_of(harness.engine, session_id)]


async def approve(
    harness: RunningHarness, session_id: str, call_id: str, decision: str, **more: Any
) -> None:
    """A decision written straight into the approvals scope (what ``approval::resolve`` ends in):
    these tests exercise the orchestrator's state trigger, not the approvals worker."""
    await harness.engine.set_state(
        DECISIONS_SCOPE.name, f"{session_id}/{call_id}", {"decision": decision, **more}
    )


def record_call(call_id: str, note: str) -> dict[str, Any]:
    return {"function_id": RECORD, "arguments": {"note": note}, "id": call_id}
