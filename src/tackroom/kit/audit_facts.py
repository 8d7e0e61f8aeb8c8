"""From an ``agent::events`` frame to the audit fact it makes (pure).

The event emitter (:mod:`tackroom.kit.events`) records each such fact on ``audit::facts`` as it
emits the event. Only security-relevant events make a fact: a run's start (with the principal it
acts for, roles and all), gate, approval and budget decisions, tool calls and their ends, the end
of a run. Tool arguments and results are recorded as digests
(:func:`tackroom.kit.audit.digest`), never as themselves; error messages are left out (they may
quote arguments), their kind is kept. A fact's id is ``event:<event_id>``: the event id is the
same on every replay of a step, so a redelivered or re-emitted event is recorded once.
"""

from __future__ import annotations

from typing import Any

from tackroom.contracts.audit import AuditFact
from tackroom.contracts.events import (
    AgentEnd,
    AgentEvent,
    ApprovalResolved,
    BudgetDecided,
    FunctionExecutionEnd,
    FunctionExecutionStart,
    GateDecided,
    TurnStateChanged,
)
from tackroom.contracts.principal import Principal
from tackroom.kit.audit import digest

__all__ = ["AUDITED", "fact_of"]

AUDITED = frozenset(
    {
        "turn_state_changed",
        "gate_decision",
        "approval_resolved",
        "budget_decision",
        "function_execution_start",
        "function_execution_end",
        "agent_end",
    }
)
"""The event types that may make a fact (the others are not even parsed)."""


def fact_of(event: AgentEvent) -> AuditFact | None:
    """The fact ``event`` records, or ``None`` for an event the audit does not keep."""
    found = _kind_and_fact(event)
    if found is None:
        return None
    kind, fact, extra = found
    return AuditFact(
        fact_id=f"event:{event.event_id}",
        kind=kind,
        session_id=event.session_id,
        run_id=event.run_id,
        fact=fact,
        **extra,
    )


def _kind_and_fact(event: AgentEvent) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    fact: dict[str, Any]
    match event:
        case TurnStateChanged(data=data) if data.from_ == "provisioning":
            fact = {"turn_count": data.turn_count}
            return "run_started", fact, {"principal": data.principal}
        case GateDecided(data=data):
            fact = {
                "function_call_id": data.function_call_id,
                "function_id": data.function_id,
                "decision": data.decision,
                "decided_by": data.decided_by,
                "rule_id": data.rule_id,
                "matched_constraint": data.matched_constraint,
                "reason": data.reason,
            }
            extra = {"principal": Principal(id=data.principal)} if data.principal else {}
            return "gate_decision", fact, extra
        case ApprovalResolved(data=data):
            fact = {
                "function_call_id": data.function_call_id,
                "function_id": data.function_id,
                "decision": data.decision,
                "approver": data.approver,
                "decided_at": data.decided_at,
                "reason": data.reason,
            }
            if data.approver_principal is not None:
                fact["approver_principal"] = data.approver_principal.model_dump(mode="json")
            if data.needed is not None:
                fact["approvals_so_far"] = data.approvals_so_far
                fact["needed"] = data.needed
            return "approval_resolved", fact, {"actor": data.approver, "at": data.decided_at}
        case BudgetDecided(data=data):
            fact = {
                "allowed": data.allowed,
                "estimate_usd": data.estimate_usd,
                "reason": data.reason,
                "budget_id": data.budget_id,
            }
            return "budget_decision", fact, {}
        case FunctionExecutionStart(data=data):
            fact = {
                "function_call_id": data.function_call_id,
                "function_id": data.function_id,
                "arguments_digest": digest(data.arguments),
            }
            return "tool_call", fact, {}
        case FunctionExecutionEnd(data=data):
            content = [block.model_dump(mode="json") for block in data.result.content]
            fact = {
                "function_call_id": data.function_call_id,
                "function_id": data.function_id,
                "is_error": data.is_error,
                "duration_ms": data.duration_ms,
                "result_digest": digest(content),
            }
            return "tool_result", fact, {}
        case AgentEnd(data=data):
            fact = {
                "state": data.state,
                "stop_reason": data.stop_reason,
                "error_kind": None if data.error is None else data.error.kind,
                "cost_usd": data.usage.cost_usd,
            }
            return "run_end", fact, {}
    return None
