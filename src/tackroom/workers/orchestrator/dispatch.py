"""Running a batch of function calls: the gate, the per-call ledger, dispatch.

Every call passes one gate (:meth:`Dispatcher.gate`). With a policy function configured the gate
asks it (5 s by default) and fails closed: no answer, an error or a reply it cannot read is a
denial with ``denied_by: gate_unavailable``. With none configured the harness runs "thin" and
allows. Calls a human approved skip the gate.

The ledger (scope ``turn-ledger``, key ``<session>/<run>/<call>``) is written ``started`` before a
call runs and ``done`` with its result after, so after a crash a done call is not run again, a
started call of an idempotent function is retried, and a started call of any other function is
reported to the model as "outcome unknown" — never silently repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import trace
from pydantic import ValidationError

from tackroom.contracts.messages import FunctionResultMessage, TextBlock
from tackroom.contracts.tools import CALL_CONTEXT_KEY, CallContext
from tackroom.engine.errors import (
    EngineError,
    FunctionNotFound,
    InvocationError,
    InvocationTimeout,
    RevisionConflict,
)
from tackroom.engine.protocol import Engine
from tackroom.workers.orchestrator.contracts import EventType
from tackroom.workers.orchestrator.planning import error_result
from tackroom.workers.orchestrator.record import CallState, ToolOffer, TurnRecord
from tackroom.workers.orchestrator.transition import CallsSettled

__all__ = ["LEDGER_SCOPE", "Dispatcher", "GateDecision"]

LEDGER_SCOPE = "turn-ledger"

Emit = Callable[[EventType, str, dict[str, Any]], Awaitable[None]]
"""``emit(event_type, event_key, data)``."""


DecidedBy = Literal["thin", "policy", "gate_unavailable", "approval_mode", "default"]


@dataclass(frozen=True, slots=True)
class GateDecision:
    decision: Literal["allow", "deny", "needs_approval"]
    decided_by: DecidedBy
    reason: str = ""
    rule_id: str | None = None
    matched_constraint: str | None = None


class Dispatcher:
    def __init__(
        self,
        engine: Engine,
        *,
        policy_function: str | None,
        policy_timeout: float,
        call_timeout: float,
        approvals_function: str | None = None,
    ) -> None:
        self._engine = engine
        self._policy_function = policy_function
        self._policy_timeout = policy_timeout
        self._approvals_function = approvals_function
        self._call_timeout = call_timeout

    async def run_batch(self, record: TurnRecord, emit: Emit) -> CallsSettled:
        """Gate and run every open call; parallel-safe ones together, the rest in order."""
        results: dict[str, FunctionResultMessage] = {}
        parked: dict[str, str] = {}
        runnable: list[tuple[CallState, ToolOffer]] = []
        for call in record.calls:
            if call.status not in ("pending", "approved"):
                continue
            tool = record.tool(call.tool_name)
            if tool is None:
                results[call.id] = error_result(call, f"tool {call.tool_name!r} is not offered")
                continue
            if call.status == "pending":
                decision = await self.gate(record, call, emit)
                if decision.decision == "deny":
                    results[call.id] = _denial(call, decision)
                    continue
                if decision.decision == "needs_approval":
                    parked[call.id] = decision.reason or "needs approval"
                    continue
            runnable.append((call, tool))

        async def run(call: CallState, tool: ToolOffer) -> None:
            results[call.id] = await self._run_once(record, call, tool, emit)

        parallel = [(c, t) for c, t in runnable if t.traits.parallel]
        if parallel:
            async with asyncio.TaskGroup() as group:
                for call, tool in parallel:
                    group.create_task(run(call, tool))
        for call, tool in runnable:
            if not tool.traits.parallel:
                await run(call, tool)
        return CallsSettled(results=results, parked=parked)

    async def gate(self, record: TurnRecord, call: CallState, emit: Emit) -> GateDecision:
        """Policy, then (for ``needs_approval``) the approvals worker; recorded as an event."""
        if self._policy_function is None and self._approvals_function is None:
            return GateDecision("allow", "thin", "no policy configured")
        decision = await self._policy(record, call)
        if decision.decision == "needs_approval" and self._approvals_function is not None:
            decision = await self._request_approval(record, call, decision)
        await emit(
            "gate_decision",
            f"{call.id}:gate",
            {
                "function_call_id": call.id,
                "function_id": call.function_id,
                "decision": decision.decision,
                "decided_by": decision.decided_by,
                "rule_id": decision.rule_id,
                "reason": decision.reason,
            },
        )
        span = trace.get_current_span()
        attributes = {
            "tackroom.gate.function_id": call.function_id or call.tool_name,
            "tackroom.gate.decision": decision.decision,
            "tackroom.gate.decided_by": decision.decided_by,
            "tackroom.gate.rule_id": decision.rule_id or "",
        }
        span.set_attributes(attributes)
        span.add_event("tackroom.gate_decision", attributes)
        return decision

    async def _request_approval(
        self, record: TurnRecord, call: CallState, policy: GateDecision
    ) -> GateDecision:
        """Register the pending call; the session's approval mode may allow it at once."""
        assert self._approvals_function is not None
        request = {
            "session_id": record.session_id,
            "function_call_id": call.id,
            "function_id": call.function_id,
            "arguments": call.arguments,
            "reason": policy.reason,
            "run_id": record.run_id,
        }
        try:
            reply = await self._engine.trigger(
                self._approvals_function, request, timeout=self._policy_timeout
            )
        except EngineError as exc:
            return GateDecision(
                "deny",
                "gate_unavailable",
                f"the approval request failed, so the call is denied: {exc}",
            )
        if isinstance(reply, dict) and reply.get("status") == "allowed":
            reason = str(reply.get("reason") or "allowed by the session's approval mode")
            return GateDecision("allow", "approval_mode", reason)
        return policy

    async def release_parked(self, before: TurnRecord, after: TurnRecord) -> None:
        """Tell the approvals worker that calls parked in ``before`` will not be decided (abort)."""
        if self._approvals_function is None:
            return
        for call in before.calls:
            if call.status != "parked":
                continue
            # Already decided or expired: nothing is left pending either way.
            with contextlib.suppress(EngineError):
                await self._engine.trigger(
                    "approval::resolve",
                    {
                        "session_id": before.session_id,
                        "function_call_id": call.id,
                        "decision": "aborted",
                        "reason": after.stop_reason or "the run ended",
                        "approver": "orchestrator",
                    },
                    timeout=self._policy_timeout,
                )

    async def _policy(self, record: TurnRecord, call: CallState) -> GateDecision:
        if self._policy_function is None:
            return GateDecision("needs_approval", "default", "no policy: every call asks")
        request = {
            "function_id": call.function_id,
            "args": call.arguments,
            "session_id": record.session_id,
        }
        try:
            reply = await self._engine.trigger(
                self._policy_function, request, timeout=self._policy_timeout
            )
            decision = reply.get("decision") if isinstance(reply, dict) else None
            if decision not in ("allow", "deny", "needs_approval"):
                raise ValueError(f"unreadable policy reply: {str(reply)[:200]}")
        except (EngineError, ValueError) as exc:
            return GateDecision(
                "deny", "gate_unavailable", f"the policy check failed, so the call is denied: {exc}"
            )
        assert isinstance(reply, dict)
        return GateDecision(
            decision,
            "policy",
            str(reply.get("reason") or ""),
            rule_id=_optional_str(reply.get("rule_id")),
            matched_constraint=_optional_str(reply.get("matched_constraint")),
        )

    async def _run_once(
        self, record: TurnRecord, call: CallState, tool: ToolOffer, emit: Emit
    ) -> FunctionResultMessage:
        key = f"{record.session_id}/{record.run_id}/{call.id}"
        entry = await self._engine.get_state(LEDGER_SCOPE, key)
        if entry is None:
            try:
                entry = await self._engine.set_state(
                    LEDGER_SCOPE, key, {"status": "started"}, expected_revision=0
                )
            except RevisionConflict:
                entry = await self._engine.get_state(LEDGER_SCOPE, key)
            else:
                return await self._invoke_and_record(record, call, tool, key, entry.revision, emit)
        assert entry is not None
        if entry.value.get("status") == "done":
            # Settled before a crash: answer from the ledger, and end the call for a client that
            # saw it start (the same event id, if the end was already emitted).
            done = FunctionResultMessage.model_validate(entry.value["result"])
            await _emit_end(emit, call, tool, done, duration_ms=None)
            return done
        if tool.traits.idempotent:
            return await self._invoke_and_record(record, call, tool, key, entry.revision, emit)
        unknown = error_result(
            call,
            f"The outcome of this call is unknown: {tool.function_id} started but the harness"
            " stopped before it reported. It is not idempotent, so it was not run again; check"
            " its effects before retrying.",
            details={"error": "outcome_unknown"},
        )
        await self._engine.set_state(
            LEDGER_SCOPE, key, {"status": "done", "result": unknown.model_dump(mode="json")}
        )
        await _emit_end(emit, call, tool, unknown, duration_ms=None)
        return unknown

    async def _invoke_and_record(
        self,
        record: TurnRecord,
        call: CallState,
        tool: ToolOffer,
        key: str,
        revision: int,
        emit: Emit,
    ) -> FunctionResultMessage:
        await emit(
            "function_execution_start",
            f"{call.id}:start",
            {
                "function_call_id": call.id,
                "function_id": tool.function_id,
                "arguments": call.arguments,
            },
        )
        started = time.perf_counter()
        result = await self._invoke(record, call, tool)
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        await self._engine.set_state(
            LEDGER_SCOPE, key, {"status": "done", "result": result.model_dump(mode="json")}
        )
        await _emit_end(emit, call, tool, result, duration_ms=duration_ms)
        return result

    async def _invoke(
        self, record: TurnRecord, call: CallState, tool: ToolOffer
    ) -> FunctionResultMessage:
        context = CallContext(
            session_id=record.session_id, function_call_id=call.id, message_id=record.message_id
        )
        payload = {**call.arguments, CALL_CONTEXT_KEY: context.model_dump()}
        try:
            value = await self._engine.trigger(
                tool.function_id, payload, timeout=self._call_timeout
            )
        except FunctionNotFound as exc:
            return error_result(call, str(exc), details={"error": "function_not_found"})
        except InvocationTimeout as exc:
            return error_result(call, str(exc), details={"error": "timeout"})
        except InvocationError as exc:
            return error_result(
                call,
                f"{tool.function_id} failed [{exc.remote_code}]: {exc.message}",
                details={"error": exc.remote_code},
            )
        return _as_result(call, tool, value)


async def _emit_end(
    emit: Emit,
    call: CallState,
    tool: ToolOffer,
    result: FunctionResultMessage,
    *,
    duration_ms: float | None,
) -> None:
    await emit(
        "function_execution_end",
        f"{call.id}:end",
        {
            "function_call_id": call.id,
            "function_id": tool.function_id,
            "result": result.model_dump(mode="json"),
            "is_error": result.is_error,
            "duration_ms": duration_ms,
        },
    )


def _as_result(call: CallState, tool: ToolOffer, value: Any) -> FunctionResultMessage:
    """A function's return value as the result the model reads.

    A value shaped like a result (``{"content": [...], ...}``) passes through; anything else is
    shown to the model as JSON text and kept whole in ``details``.
    """
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        try:
            return FunctionResultMessage(
                function_call_id=call.id,
                function_id=tool.function_id,
                content=value["content"],
                is_error=bool(value.get("is_error", False)),
                details=value.get("details"),
            )
        except ValidationError:
            pass
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return FunctionResultMessage(
        function_call_id=call.id,
        function_id=tool.function_id,
        content=[TextBlock(text=text)],
        details=value,
    )


def _denial(call: CallState, decision: GateDecision) -> FunctionResultMessage:
    """The result a denied call gets: the model reads the reason; ``details`` is the envelope."""
    details = {
        "schema_version": 1,
        "status": "denied",
        "denied_by": "permissions" if decision.decided_by == "policy" else decision.decided_by,
        "function_id": call.function_id,
        "rule_id": decision.rule_id,
        "matched_constraint": decision.matched_constraint,
        "reason": decision.reason,
    }
    return error_result(call, f"[PERMISSION_DENIED] {decision.reason}", details=details)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
