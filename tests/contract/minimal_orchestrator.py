"""A minimal orchestrator, written for the tests only: what a user's replacement of the shipped
``orchestrator`` worker looks like when it keeps the contract and nothing more.

It serves ``run::start``, ``run::abort`` and ``turn::get_state`` (:mod:`tackroom.contracts.turn`)
with a deliberately simple loop, one delivery of its own queue per run (grouped by session):
offer the catalog's functions the run's globs match, call ``provider::<name>::complete`` with
the session's messages, gate each tool call through ``policy::check_permissions``, call the
tools, append every message to the session, publish the run on ``agent::events`` through the one
emitter (:class:`tackroom.kit.events.EventEmitter`) and keep the turn in engine state.

It imports ``tackroom.contracts``, ``kit``, ``runtime`` and ``engine`` only, never a worker. It
leaves out what the contract suite does not ask for: live deltas, approvals (``needs_approval``
is a denial here), hooks, budgets, context budgets, steering and follow-up inboxes
(``if_busy: queue`` is refused), subagents, a call ledger and crash recovery step by step.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import time
import uuid
from typing import Any

from pydantic import BaseModel, Field

from tackroom.contracts import events as ev
from tackroom.contracts import sessions as tree
from tackroom.contracts import turn
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    TextBlock,
)
from tackroom.contracts.policy import CHECK_PERMISSIONS, CheckRequest
from tackroom.contracts.provider import ProviderRequest, ToolSpec, complete_function, tool_name_for
from tackroom.contracts.tools import CALL_CONTEXT_KEY, NEVER_OFFERED, CallContext
from tackroom.contracts.turn import TERMINAL_STATES, TurnError, TurnState, TurnStateView
from tackroom.engine.errors import EngineError, InvocationError, RevisionConflict
from tackroom.engine.protocol import Engine, QueueConfig
from tackroom.kit.events import EventEmitter
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = ["WORKER", "MinimalConfig"]

RUNS = "minimal-turns"
"""Key = session id: the session's current or last run (:class:`Run`)."""
ABORTS = "minimal-aborts"
"""Key = session id: ``{"run_id", "reason"}`` of an abort requested."""
DRIVE = "minimal-turn::drive"
QUEUE = "minimal-turn"

_log = logging.getLogger("tests.minimal_orchestrator")


class MinimalConfig(WorkerConfig):
    policy_function: str = CHECK_PERMISSIONS.id
    """Asked about every tool call; ``allow`` runs it, anything else (or no answer) refuses it."""
    timeout: float = Field(default=60.0, gt=0, description="seconds for a model or tool call")


class Run(BaseModel):
    """What the minimal orchestrator keeps of a run (scope :data:`RUNS`)."""

    request: turn.RunStartRequest
    view: TurnStateView
    tools: dict[str, str] = Field(default_factory=dict)
    """Tool name the model sees → function id."""
    specs: list[ToolSpec] = Field(default_factory=list)
    calls: list[FunctionCallBlock] = Field(default_factory=list)
    """The calls of the last answer, while they run."""
    told: int = 0
    """Events published so far: their ids are ``<run_id>:<n>``."""


class Minimal:
    def __init__(self, ctx: WorkerContext[MinimalConfig]) -> None:
        self.engine: Engine = ctx.engine
        self.config = ctx.config
        self.events = EventEmitter(ctx.engine)
        self.policy = CHECK_PERMISSIONS.at(ctx.config.policy_function)

    # -- the record ----------------------------------------------------------------------------
    async def load(self, session_id: str) -> tuple[Run, int] | None:
        entry = await self.engine.get_state(RUNS, session_id)
        return None if entry is None else (Run.model_validate(entry.value), entry.revision)

    async def save(self, run: Run) -> None:
        await self.engine.set_state(RUNS, run.view.session_id, run.model_dump(mode="json"))

    # -- the functions -------------------------------------------------------------------------
    async def run_start(self, request: turn.RunStartRequest) -> turn.RunStartResponse:
        sid = request.session_id
        found = await self.load(sid)
        revision = 0
        if found is not None:
            current, revision = found
            if request.run_id is not None and request.run_id == current.view.run_id:
                return turn.RunStartResponse(
                    session_id=sid, started=True, run_id=current.view.run_id, resumed=True
                )
            if current.view.state not in TERMINAL_STATES:
                return _busy(sid, current.view)
        run_id = request.run_id or f"run-{uuid.uuid4().hex[:12]}"
        await tree.ENSURE.call(self.engine, tree.EnsureRequest(session_id=sid))
        view = TurnStateView(
            session_id=sid,
            run_id=run_id,
            state="provisioning",
            step=0,
            turn_count=0,
            max_turns=request.max_turns,
        )
        run = Run(request=request.model_copy(update={"run_id": run_id}), view=view)
        try:
            await self.engine.set_state(
                RUNS, sid, run.model_dump(mode="json"), expected_revision=revision
            )
        except RevisionConflict:
            latest = await self.load(sid)
            return _busy(sid, None if latest is None else latest[0].view)
        await self.engine.enqueue(
            DRIVE, {"session_id": sid, "run_id": run_id}, queue=QUEUE, group=sid
        )
        return turn.RunStartResponse(session_id=sid, started=True, run_id=run_id)

    async def run_abort(self, request: turn.RunAbortRequest) -> turn.RunAbortResponse:
        sid = request.session_id
        view = await self.get_state(turn.TurnStateRequest(session_id=sid))
        if view is None or view.state in TERMINAL_STATES:
            state = None if view is None else view.state
            return turn.RunAbortResponse(session_id=sid, aborted=False, state=state)
        await self.engine.set_state(ABORTS, sid, {"run_id": view.run_id, "reason": request.reason})
        return turn.RunAbortResponse(session_id=sid, aborted=True, state=view.state)

    async def get_state(self, request: turn.TurnStateRequest) -> TurnStateView | None:
        found = await self.load(request.session_id)
        return None if found is None else found[0].view

    # -- the loop ------------------------------------------------------------------------------
    async def drive(self, payload: Any) -> None:
        """A delivery of :data:`QUEUE`: ``{session_id, run_id}``."""
        found = await self.load(str(payload.get("session_id")))
        if found is None:
            return
        run = found[0]
        if run.view.run_id != payload.get("run_id") or run.view.state in TERMINAL_STATES:
            return
        try:
            await self._drive(run)
        except Exception as exc:  # a simple loop: whatever goes wrong ends the run, with why
            _log.exception("run %s failed", run.view.run_id)
            error = TurnError(kind="unexpected_error", message=f"{type(exc).__name__}: {exc}")
            await self.finish(run, "failed", "error", error=error)

    async def _drive(self, run: Run) -> None:
        request = run.request
        if run.view.state == "provisioning":
            first = [(_entry(run, f"m{i}"), m) for i, m in enumerate(request.messages)]
            await self.append(run, first)
            await self.offer(run)
            await self.move(run, "assistant_streaming")
        while True:
            if await self.aborted(run):
                await self.finish(run, "stopped", "aborted")
                return
            if run.view.state == "assistant_streaming":
                message = await self.ask_model(run)
                run.view.turn_count += 1
                run.view.usage = run.view.usage + message.usage
                entry = _entry(run, f"t{run.view.turn_count}-a")
                await self.append(run, [(entry, message)])
                await self.emit(run, ev.MessageCompleteData(message_id=entry, message=message))
                run.calls = message.function_calls()
                if run.calls and message.stop_reason not in ("error", "aborted"):
                    await self.move(run, "function_execute")
                    continue
                await self.emit(
                    run, ev.TurnEndData(turn_count=run.view.turn_count, message_id=entry)
                )
                if message.stop_reason == "error":
                    text = message.error_message or "the model call failed"
                    error = TurnError(kind=message.error_kind or "permanent", message=text)
                    await self.finish(run, "stopped", "error", error=error)
                    return
                await self.move(run, "steering_check")
                await self.finish(run, "stopped", "end")
                return
            if run.view.state == "function_execute":  # the answer's calls, one after the other
                results = [await self.call_tool(run, call) for call in run.calls]
                await self.append(
                    run, [(_entry(run, f"fr-{r.function_call_id}"), r) for r in results]
                )
                answer = _entry(run, f"t{run.view.turn_count}-a")
                turn_count, run.calls = run.view.turn_count, []
                end = ev.TurnEndData(
                    turn_count=turn_count, message_id=answer, function_results=results
                )
                await self.emit(run, end)
                await self.move(run, "steering_check")
            elif run.view.turn_count >= run.view.max_turns:  # steering_check
                await self.finish(run, "stopped", "max_turns")
                return
            else:
                await self.move(run, "assistant_streaming")

    async def offer(self, run: Run) -> None:
        """The catalog's functions the run's globs match, as tools (named ``fs__read``)."""
        patterns = run.request.tools
        for info in sorted(await self.engine.list_functions(), key=lambda f: f.function_id):
            function_id = info.function_id
            if _matches(function_id, NEVER_OFFERED) or not _matches(function_id, patterns):
                continue
            schema = info.request_schema or {"type": "object", "properties": {}}
            name = tool_name_for(function_id)
            run.tools[name] = function_id
            parameters = {k: v for k, v in schema.items() if not k.startswith("x-")}
            run.specs.append(
                ToolSpec(name=name, description=info.description, parameters=parameters)
            )

    async def ask_model(self, run: Run) -> AssistantMessage:
        request = run.request
        reply = await tree.MESSAGES.call(
            self.engine, tree.MessagesRequest(session_id=run.view.session_id)
        )
        prompt = "\n\n".join(p for p in (request.system_prompt, request.instructions) if p)
        asked = ProviderRequest(
            model=request.model,
            system_prompt=prompt,
            messages=[item.message for item in reply.messages],
            tools=run.specs,
            session_id=run.view.session_id,
        )
        function = complete_function(request.provider)
        try:
            return await function.call(self.engine, asked, timeout=self.config.timeout)
        except EngineError as exc:
            text = f"the model call failed: {exc}"
            return AssistantMessage(
                content=[TextBlock(text=text)],
                stop_reason="error",
                error_kind="transient",
                error_message=text,
            )

    async def call_tool(self, run: Run, call: FunctionCallBlock) -> FunctionResultMessage:
        fid, who = run.tools.get(call.tool_name), run.request.principal
        if fid is None:
            return _result(call, call.tool_name, f"unknown tool {call.tool_name!r}", error=True)
        check = CheckRequest(function_id=fid, args=call.arguments, session_id=run.view.session_id)
        if who is not None:  # who the run acts for, as a policy reads it
            check.principal, check.roles, check.tenant = who.id, list(who.roles), who.tenant
        try:
            verdict = await self.policy.call(self.engine, check)
            decision, rule_id, reason = verdict.decision, verdict.rule_id, verdict.reason
            by = "policy"
        except EngineError as exc:
            decision, rule_id, reason, by = "deny", None, f"no policy decision: {exc}", "default"
        said = {"decision": decision, "decided_by": by, "rule_id": rule_id, "reason": reason}
        await self.emit(run, ev.GateDecidedData(function_call_id=call.id, function_id=fid, **said))
        if decision != "allow":
            return _result(call, fid, f"Permission denied: {reason}", error=True)
        ids = {"function_call_id": call.id, "function_id": fid}
        await self.emit(run, ev.FunctionExecutionStartData(**ids, arguments=call.arguments))
        context = CallContext(
            session_id=run.view.session_id,
            function_call_id=call.id,
            run_id=run.view.run_id,
            principal=who,
        )
        payload = {**call.arguments, CALL_CONTEXT_KEY: context.model_dump(mode="json")}
        began = time.perf_counter()
        try:
            value = await self.engine.trigger(fid, payload, timeout=self.config.timeout)
            result = _result(call, fid, json.dumps(value), details=value)
        except InvocationError as exc:
            result = _result(call, fid, f"[{exc.remote_code}] {exc.message}", error=True)
        except EngineError as exc:
            result = _result(call, fid, str(exc), error=True)
        took = round((time.perf_counter() - began) * 1000, 3)
        end = ev.FunctionExecutionEndData(
            **ids, result=result, is_error=result.is_error, duration_ms=took
        )
        await self.emit(run, end)
        return result

    # -- steps, entries, events ----------------------------------------------------------------
    async def move(self, run: Run, state: TurnState) -> None:
        """Keep the run in ``state``, then tell it."""
        before, run.view.state = run.view.state, state
        run.view.step += 1
        await self.save(run)
        count, who = run.view.turn_count, run.request.principal
        changed = ev.TurnStateChangedData(from_=before, to=state, turn_count=count, principal=who)
        await self.emit(run, changed)

    async def finish(
        self, run: Run, state: TurnState, stop_reason: str, *, error: TurnError | None = None
    ) -> None:
        run.view.stop_reason, run.view.error = stop_reason, error
        await self.move(run, state)
        end = ev.AgentEndData(
            state="failed" if state == "failed" else "stopped",
            stop_reason=stop_reason,
            usage=run.view.usage,
            error=None if error is None else ev.ErrorData(kind=error.kind, message=error.message),
            agent=run.request.agent,
        )
        await self.emit(run, end)

    async def aborted(self, run: Run) -> bool:
        entry = await self.engine.get_state(ABORTS, run.view.session_id)
        return entry is not None and entry.value.get("run_id") == run.view.run_id

    async def append(self, run: Run, entries: list[tuple[str, AgentMessage]]) -> None:
        if not entries:
            return
        request = tree.AppendBatchRequest(
            session_id=run.view.session_id,
            entries=[
                tree.BatchItem(entry_id=entry_id, message=message) for entry_id, message in entries
            ],
            principal=run.request.principal,
        )
        await tree.APPEND_BATCH.call(self.engine, request)

    async def emit(self, run: Run, data: ev.EventData) -> None:
        run.told += 1
        await self.events.emit_data(
            session_id=run.view.session_id, run_id=run.view.run_id, key=(run.told,), data=data
        )


def _busy(session_id: str, view: TurnStateView | None) -> turn.RunStartResponse:
    state = "unknown" if view is None else f"{view.run_id} is in state {view.state}"
    return turn.RunStartResponse(
        session_id=session_id, started=False, reason=f"session_busy: run {state}"
    )


def _entry(run: Run, key: str) -> str:
    """A session entry's id: derived from the run's, so an append repeated stores nothing new."""
    return f"{run.view.run_id}-{key}"


def _matches(function_id: str, patterns: list[str] | tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(function_id, pattern) for pattern in patterns)


def _result(
    call: FunctionCallBlock,
    function_id: str,
    text: str,
    *,
    error: bool = False,
    details: Any = None,
) -> FunctionResultMessage:
    return FunctionResultMessage(
        function_call_id=call.id,
        function_id=function_id,
        content=[TextBlock(text=text)],
        is_error=error,
        details=details,
    )


async def start(ctx: WorkerContext[MinimalConfig]) -> None:
    minimal = Minimal(ctx)
    config = QueueConfig(max_deliveries=1, visibility_timeout=ctx.config.timeout * 4)
    await ctx.engine.configure_queue(QUEUE, config)
    await ctx.serve(turn.RUN_START, minimal.run_start)
    await ctx.serve(turn.RUN_ABORT, minimal.run_abort)
    await ctx.serve(turn.TURN_GET_STATE, minimal.get_state)

    async def serve_runs() -> None:  # once the providers and tools booted with it are live
        await ctx.register_function(DRIVE, minimal.drive, description="Drive a run (minimal).")

    ctx.after_start(serve_runs)


WORKER = WorkerSpec(
    name="minimal-orchestrator",
    description="A minimal orchestrator for the contract tests: run::start, run::abort, "
    "turn::get_state.",
    config_model=MinimalConfig,
    start=start,
)
