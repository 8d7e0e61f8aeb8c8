"""Subagent calls: start a batch's children, read their outcomes, tell a parent its child ended.

A call of an ``agent::<name>`` tool is not run through the ledger: the agents worker's function
starts (or, on a redelivered step, finds) the child run, whose session and run ids derive from the
parent's run and call, and answers at once. The call then waits with the turn parked. When a
child run ends, the delivery that committed its end writes the :class:`SubagentOutcome` under
``subagent-outcomes/<parent session>/<call>`` — once: the write is create-only, and a delivery
redelivered after a crash writes it if it is missing — and, in the same transaction, enqueues the
parent's ``turn::step``, which reads every outcome available. The step waits in the parent's
queue group while the parent is still being driven (a child that ended before its parent parked),
so the wake is never lost and needs no trigger delivery of its own.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import ValidationError

from tackroom.contracts.agents import (
    AGENT_PREFIX,
    OUTCOMES_SCOPE,
    SubagentOutcome,
    SubagentReply,
    child_ids,
    outcome_key,
)
from tackroom.contracts.events import SubagentStartedData
from tackroom.contracts.messages import FunctionResultMessage, text_of
from tackroom.contracts.provenance import Label
from tackroom.contracts.turn import RUN_ABORT, RunAbortRequest
from tackroom.engine.errors import (
    FunctionNotFound,
    InvocationError,
    RevisionConflict,
    unavailable_cause,
)
from tackroom.engine.protocol import Engine
from tackroom.workers.orchestrator.callevents import Emit, emit_call_end, emit_call_start
from tackroom.workers.orchestrator.delegation import ChildEnded, child_ended
from tackroom.workers.orchestrator.flow import FlowIndex
from tackroom.workers.orchestrator.planning import error_result, validation_error
from tackroom.workers.orchestrator.record import CallState, ToolOffer, TurnRecord
from tackroom.workers.orchestrator.transcript import SessionsClient
from tackroom.workers.orchestrator.wake import wake

__all__ = ["Subagents"]

_NOT_NORMAL = {
    "budget_exceeded": "its budget is spent",
    "max_turns": "it reached its max_turns",
    "loop_detected": "it repeated the same call",
    "tool_loop": "it kept calling the same tool",
    "aborted": "it was aborted",
    "error": "it failed",
}


class Subagents:
    def __init__(
        self,
        engine: Engine,
        *,
        sessions: SessionsClient,
        flows: FlowIndex,
        max_fanout: int,
        timeout: float,
    ) -> None:
        self._engine = engine
        self._sessions = sessions
        self._flows = flows
        self._max_fanout = max_fanout
        self._timeout = timeout

    async def start_all(
        self,
        record: TurnRecord,
        calls: list[tuple[CallState, ToolOffer]],
        emit: Emit,
        results: dict[str, FunctionResultMessage],
        *,
        context_label: Label | None = None,
    ) -> dict[str, SubagentStartedData]:
        """Start every call's child together; a refusal or a failure to start is its result.
        A child started from a context that held untrusted content starts from a task labelled
        so (``context_label``)."""
        waiting: dict[str, SubagentStartedData] = {}
        if not calls:
            return waiting
        allowed, over = calls[: self._max_fanout], calls[self._max_fanout :]
        for call, _ in over:
            refused = error_result(
                call,
                f"Refused: at most {self._max_fanout} subagent calls in one message; call the"
                " others after these have answered.",
                details={"error": "subagent_fanout"},
            )
            results[call.id] = refused
            await emit_call_end(emit, call, refused)

        async def start(call: CallState, tool: ToolOffer) -> None:
            await emit_call_start(emit, call)
            outcome = await self._start(record, call, tool, context_label)
            if isinstance(outcome, FunctionResultMessage):
                results[call.id] = outcome
                await emit_call_end(emit, call, outcome)
            else:
                waiting[call.id] = outcome

        async with asyncio.TaskGroup() as group:
            for call, tool in allowed:
                group.create_task(start(call, tool))
        return waiting

    async def _start(
        self, record: TurnRecord, call: CallState, tool: ToolOffer, label: Label | None
    ) -> SubagentStartedData | FunctionResultMessage:
        payload = record.call_payload(call, context_label=label)
        try:
            raw = await self._engine.trigger(tool.function_id, payload, timeout=self._timeout)
            reply = SubagentReply.model_validate(raw)
        except FunctionNotFound as exc:
            return error_result(call, str(exc), details={"error": "function_not_found"})
        except InvocationError as exc:
            if unavailable_cause(exc) is not None:
                raise  # the engine is away: the step is retried (starting is idempotent)
            message = f"{tool.function_id} failed [{exc.remote_code}]: {exc.message}"
            return error_result(call, message, details={"error": exc.remote_code})
        except ValidationError as exc:
            message = f"{tool.function_id} answered what is not a subagent reply: {exc}"
            return error_result(call, message, details={"error": "invalid_reply"})
        if reply.status == "refused" or reply.child_session_id is None:
            text = f"Refused: {reply.reason or 'the subagent could not start'}"
            return error_result(call, text, details={"error": "subagent_refused"})
        return SubagentStartedData(
            function_call_id=call.id,
            agent=reply.agent,
            child_session_id=reply.child_session_id,
            child_run_id=reply.child_run_id or "",
        )

    async def read_outcomes(self, record: TurnRecord) -> dict[str, ChildEnded]:
        ended: dict[str, ChildEnded] = {}
        for call in record.calls:
            if call.status != "waiting":
                continue
            key = outcome_key(record.session_id, call.id)
            entry = await self._engine.get_state(OUTCOMES_SCOPE, key)
            if entry is not None:
                ended[call.id] = child_ended(call, SubagentOutcome.model_validate(entry.value))
        return ended

    async def ended(self, record: TurnRecord, *, parent_told: bool = False) -> None:
        """What a run that ended owes the tree: its parent's outcome (unless its last commit
        carried it: ``parent_told``), its children's abort."""
        if not parent_told:
            await self.notify_parent(record)
        await self.abort_children(record)

    async def notify_parent(self, record: TurnRecord) -> None:
        """A finished child run: write its outcome for the parent and wake it, unless written."""
        link = record.parent
        if link is None or not record.terminal:
            return
        key = outcome_key(link.session_id, link.function_call_id)
        outcome = await self._outcome(record)
        try:
            async with self._engine.transaction():
                await self._engine.set_state(
                    OUTCOMES_SCOPE, key, outcome.model_dump(mode="json"), expected_revision=0
                )
                await wake(self._engine, link.session_id, link.run_id)
        except RevisionConflict:
            # Create-only: a redelivered end finds it written. Where the write and the wake
            # were one transaction the parent was woken too; elsewhere a crash may have come
            # between them, so wake it again (a wake that finds nothing new changes nothing).
            if not self._engine.atomic_transactions:
                await wake(self._engine, link.session_id, link.run_id)

    async def abort_children(self, record: TurnRecord) -> None:
        """An aborted run aborts the child runs its waiting calls had started (each closed with
        an aborted result); a child that has ended already is left as it is."""
        if not record.terminal or record.stop_reason != "aborted":
            return
        for call in record.calls:
            tool = record.tool(call.tool_name)
            details = call.result.details if call.result is not None else None
            if tool is None or not tool.traits.subagent or not isinstance(details, dict):
                continue
            if details.get("decision") != "aborted":
                continue
            agent = tool.function_id.removeprefix(AGENT_PREFIX)
            child, _ = child_ids(record.session_id, record.run_id, call.id, agent)
            reason = f"its parent run {record.run_id} was aborted"
            await RUN_ABORT.call(self._engine, RunAbortRequest(session_id=child, reason=reason))

    async def _outcome(self, record: TurnRecord) -> SubagentOutcome:
        link = record.parent
        assert link is not None
        answer = record.last_assistant
        text = "" if answer is None else text_of(answer.content)
        normal = record.state == "stopped" and record.stop_reason == "end"
        error: str | None = None
        output: Any = None
        if not normal:
            error = await self._why(record)
        elif link.output_schema is not None:
            output, error = _structured(text, link.output_schema)
        return SubagentOutcome(
            agent=link.agent,
            child_session_id=record.session_id,
            child_run_id=record.run_id,
            state="failed" if record.state == "failed" else "stopped",
            stop_reason=record.stop_reason,
            text=text,
            output=output,
            error=error,
            usage=record.usage,
            label=(await self._flows.context(record.session_id)).label,
        )

    async def _why(self, record: TurnRecord) -> str:
        reason = record.stop_reason or "error"
        said = _NOT_NORMAL.get(reason, reason)
        if record.error is not None:
            return f"{said} ({reason}): {record.error.message}"
        # The note the run stopped with (``Stopped by the budget: …``) says the most.
        note_id = record.entry_id(f"stop-{reason}")
        for entry_id, message in await self._sessions.path(record.session_id):
            if entry_id == note_id:
                return f"{said} ({reason}): {text_of(message.content)}"
        return f"{said} ({reason})"


def _structured(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """The answer as one JSON value valid against ``schema``, or why it is not."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as exc:
        return None, f"its answer is not the JSON its output schema asks for: {exc.msg}"
    problem = validation_error(value, schema)
    if problem is not None:
        return None, f"its answer does not match its output schema: {problem}"
    return value, None
