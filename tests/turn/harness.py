"""Building blocks of the turn's reliability tests: test tools, an embedded harness, readers.

The harness is booted the way ``tackroom run`` boots it (``agent_host_config``'s workers, in its
order: engine, sessions, orchestrator, files, utilities, the provider), plus the test tools. Both
the crash child process (``crash_harness.py``) and the in-process tests use it. A fake policy
worker (:class:`FakePolicy`) stands in for the gate.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tackroom.cli.run import agent_host_config
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.tools import CallContext
from tackroom.contracts.turn import (
    APPROVALS_SCOPE,
    EVENTS_STREAM,
    RUN_START,
    RunStartRequest,
    RunStartResponse,
)
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
    Host,
    WorkerConfig,
    WorkerContext,
    WorkerSpec,
    load_worker,
)
from tackroom.runtime.tools import register_tool
from tackroom.testing import MEMORY_URL, Script, ScriptedProvider, wait_until
from tackroom.workers.orchestrator.record import TURNS_SCOPE, TurnRecord

__all__ = [
    "POLICY",
    "RECORD",
    "TOUCH",
    "FakePolicy",
    "Harness",
    "Hold",
    "RecordTools",
    "agent_workers",
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


def agent_workers(
    *extra: WorkerSpec[Any], provider: WorkerSpec[Any] | None = None
) -> list[WorkerSpec[Any]]:
    """The workers ``tackroom run`` boots, in its order, then ``extra``.

    ``provider``: a provider spec built in Python, in the place of the ``scripted`` worker
    (which is otherwise configured by its ``worker_config`` section).
    """
    names = agent_host_config(HarnessConfig.defaults(), provider="scripted").workers
    specs = [
        provider if name == "scripted" and provider is not None else load_worker(name)
        for name in names
    ]
    return [*specs, *extra]


def harness_config(
    workdir: Path,
    *,
    scripted: dict[str, Any] | None = None,
    orchestrator: dict[str, Any] | None = None,
) -> HarnessConfig:
    sections: dict[str, dict[str, Any] | None] = {
        "files": {"workspace_root": str(workdir / "workspaces")},
        "orchestrator": {"cwd": str(workdir), **(orchestrator or {})},
    }
    if scripted is not None:
        sections["scripted"] = scripted
    return HarnessConfig(schema_version=1, worker_config=sections)


async def turn_of(engine: Engine, session_id: str) -> TurnRecord | None:
    entry = await engine.get_state(TURNS_SCOPE, session_id)
    return None if entry is None else TurnRecord.model_validate(entry.value)


async def wait_for_terminal(engine: Engine, session_id: str, *, timeout: float = 10) -> TurnRecord:
    """The session's turn record once it is ``stopped`` or ``failed``."""
    latest: list[TurnRecord | None] = [None]

    async def terminal() -> bool:
        latest[0] = record = await turn_of(engine, session_id)
        return record is not None and record.terminal

    def state() -> str:
        record = latest[0]
        return f"the turn of {session_id} ends (now: {record and record.state})"

    await wait_until(terminal, timeout=timeout, message=state)
    assert latest[0] is not None
    return latest[0]


async def events_of(engine: Engine, session_id: str, *, after: int = 0) -> list[StreamRecord]:
    return await engine.read(EVENTS_STREAM, session_id, after=after, limit=100_000)


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
class Harness:
    """An in-process agent harness on one engine, with its scripted provider and test tools."""

    host: Host
    provider: ScriptedProvider
    tools: RecordTools
    held: list[str]
    """Names of the holds reached (see :func:`install_holds`)."""

    @property
    def engine(self) -> Engine:
        return self.host.engine

    async def start(self, session_id: str, text: str = "go", **options: Any) -> RunStartResponse:
        """``run::start`` with ``text`` as the user message; ``options``: other request fields."""
        fields: dict[str, Any] = {
            "provider": self.provider.name,
            "model": "test-model",
            "tools": ["test::*", "calc::*"],
            **options,
        }
        request = RunStartRequest(
            session_id=session_id, messages=[UserMessage.text(text)], **fields
        )
        reply = await self.engine.trigger(RUN_START, request.model_dump(mode="json"))
        return RunStartResponse.model_validate(reply)

    async def run(self, session_id: str, text: str = "go", **options: Any) -> TurnRecord:
        """Start a run and wait for it to end."""
        reply = await self.start(session_id, text, **options)
        assert reply.started, reply.reason
        return await wait_for_terminal(self.engine, session_id)


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
) -> AsyncIterator[Harness]:
    """Boot engine, sessions, orchestrator, files, utilities, a scripted provider (transcript
    cursor) and the test tools (their side effects in ``workdir``), plus ``extra``.

    ``hold``: the test tools wait for it; ``holds``: calls blocked until the host closes (a
    clean shutdown there is a crash for the blocked step: it is not acknowledged).
    """
    provider = ScriptedProvider(script, per_session=per_session, cursor="transcript")
    tools = RecordTools(workdir / "side_effects.log", hold=hold)
    engine = open_engine(url)
    held: list[str] = []
    install_holds(engine, holds, on_hold=held.append)
    host = Host(
        engine=engine,
        workers=agent_workers(tools.worker_spec(), *extra, provider=provider.worker_spec()),
        config=harness_config(workdir, orchestrator=orchestrator),
    )
    async with host:
        yield Harness(host=host, provider=provider, tools=tools, held=held)


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
) -> AbstractAsyncContextManager[Harness]:
    """:func:`running_harness` with ``policy`` booted and configured as the gate."""
    orchestrator = {"policy_function": POLICY, **options.pop("orchestrator", {})}
    return running_harness(
        tmp_path, script, orchestrator=orchestrator, extra=[policy.worker_spec()], **options
    )


async def wait_for_state(harness: Harness, session_id: str, state: str) -> None:
    async def reached() -> bool:
        record = await turn_of(harness.engine, session_id)
        return record is not None and record.state == state

    await wait_until(reached, message=f"{session_id} reaches {state}")


async def event_types(harness: Harness, session_id: str) -> list[str]:
    return [r.data["type"] for r in await events_of(harness.engine, session_id)]


async def approve(
    harness: Harness, session_id: str, call_id: str, decision: str, **more: Any
) -> None:
    await harness.engine.set_state(
        APPROVALS_SCOPE, f"{session_id}/{call_id}", {"decision": decision, **more}
    )


def record_call(call_id: str, note: str) -> dict[str, Any]:
    return {"function_id": RECORD, "arguments": {"note": note}, "id": call_id}
