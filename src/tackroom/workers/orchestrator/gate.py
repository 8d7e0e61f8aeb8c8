"""The gate every function call passes: hooks, policy, approvals — each optional, each closed.

``before_function_call`` hooks may block; then two checks no configuration turns off: in ``plan``
and ``ask`` mode only a tool declared ``read_only`` runs, and a tool's ``required_permission``
must be one of the roles of the principal the run acts for. Then the policy function (5 s by
default) decides, and fails closed: no answer, an error or a reply it cannot read is a denial
with ``denied_by: gate_unavailable`` — unless the tool's ``on_policy_error`` trait (else the
orchestrator's ``policy_on_error``) is ``allow``: then the call is allowed with ``decided_by:
fail_open`` and the reason it failed open, in the ``gate_decision`` event the audit log keeps
(never a protected function: those are denied whatever the setting). A ``needs_approval`` goes
to the approvals worker, with the policy rule's approvers (who may approve) and the principal
the run acts for; the session's mode may allow it at once (never a call with approvers);
otherwise the call parks. With no policy and
no approvals configured the harness runs "thin" and allows. Every decision is an event and a
span attribute. ``after_function_call`` hooks may rewrite a result; one that fails withholds it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import trace
from pydantic import ValidationError

from tackroom.contracts.approvals import REQUEST, RESOLVE, ApprovalRequest, ResolveRequest
from tackroom.contracts.approvers import ApproverRules
from tackroom.contracts.events import GateDecidedData
from tackroom.contracts.hooks import AFTER_FUNCTION_CALL, BEFORE_FUNCTION_CALL
from tackroom.contracts.messages import FunctionResultMessage
from tackroom.contracts.policy import CHECK_PERMISSIONS, CheckRequest, protected_by
from tackroom.contracts.tools import OnPolicyError, ToolTraits
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine
from tackroom.kit.hooks.publish import HookSubscriptions
from tackroom.runtime.typed import describe_validation_error
from tackroom.workers.orchestrator.callevents import Emit, function_of
from tackroom.workers.orchestrator.flow import ContextFlow
from tackroom.workers.orchestrator.planned import PLAN_READERS
from tackroom.workers.orchestrator.planning import error_result
from tackroom.workers.orchestrator.record import CallState, ToolOffer, TurnRecord

__all__ = ["Gate", "GateDecision", "denial"]

_log = logging.getLogger("tackroom.orchestrator.gate")

DecidedBy = Literal[
    "thin",
    "policy",
    "gate_unavailable",
    "fail_open",
    "approval_mode",
    "default",
    "hook",
    "tool",
    "mode",
    "permission",
    "cap",
    "plan",
]
_LOOKING_MODES = ("plan", "ask")
"""Modes in which the run only looks: a call that is not ``read_only`` is denied."""


@dataclass(frozen=True, slots=True)
class GateDecision:
    decision: Literal["allow", "deny", "needs_approval"]
    decided_by: DecidedBy
    reason: str = ""
    rule_id: str | None = None
    matched_constraint: dict[str, Any] | None = None
    """The policy's constraint object (``{arg, op, value}``), kept as JSON, never stringified."""
    approvers: ApproverRules | None = None
    """``needs_approval`` from the policy: who may approve (the rule's approvers)."""


class Gate:
    def __init__(
        self,
        engine: Engine,
        *,
        policy_function: str | None,
        approvals_function: str | None,
        timeout: float,
        hooks: HookSubscriptions | None,
        on_error: OnPolicyError = "deny",
        max_external_calls: int | None = None,
    ) -> None:
        self._engine = engine
        self._on_error = on_error
        self._external_cap = max_external_calls
        self._policy = None if policy_function is None else CHECK_PERMISSIONS.at(policy_function)
        self._approvals = None if approvals_function is None else REQUEST.at(approvals_function)
        self._policy_timeout = timeout
        self._hooks = hooks

    async def check(
        self,
        record: TurnRecord,
        call: CallState,
        emit: Emit,
        *,
        flow: ContextFlow | None = None,
        external_allowed: int = 0,
    ) -> GateDecision:
        """Hooks, policy, then (for ``needs_approval``) approvals; recorded as an event. The
        policy is told the call's flow facts from ``flow``, the context the model read;
        ``external_allowed`` counts this batch's external calls already let through (the
        run's cap counts them with the ones it made before)."""
        blocked = await self._before_hooks(record, call)
        tool = record.tool(call.tool_name)
        asks = tool is not None and tool.traits.requires_approval
        if blocked is None:
            blocked = _builtin_denial(record, tool) or self._over_cap(
                record, tool, external_allowed
            )
        if blocked is not None:
            decision = blocked
        elif self._policy is None and self._approvals is None and not asks:
            return GateDecision("allow", "thin", "no policy configured")
        elif self._policy is None and asks:
            decision = GateDecision("needs_approval", "tool", "this tool asks before every call")
        else:
            decision = await self._policy_check(record, call, tool, flow)
            if asks and decision.decision == "allow":
                decision = GateDecision(
                    "needs_approval", "tool", "this tool asks before every call"
                )
        if decision.decision == "needs_approval" and self._approvals is not None:
            decision = await self._request_approval(record, call, decision)
        await emit(
            f"{call.id}:gate",
            GateDecidedData(
                function_call_id=call.id,
                function_id=function_of(call),
                decision=decision.decision,
                decided_by=decision.decided_by,
                rule_id=decision.rule_id,
                matched_constraint=decision.matched_constraint,
                reason=decision.reason,
                principal=None if record.principal is None else record.principal.id,
            ),
        )
        span = trace.get_current_span()
        attributes = {
            "tackroom.gate.function_id": function_of(call),
            "tackroom.gate.decision": decision.decision,
            "tackroom.gate.decided_by": decision.decided_by,
            "tackroom.gate.rule_id": decision.rule_id or "",
        }
        if decision.matched_constraint is not None:
            attributes["tackroom.gate.matched_constraint"] = _compact_json(
                decision.matched_constraint
            )
        span.set_attributes(attributes)
        span.add_event("tackroom.gate_decision", attributes)
        return decision

    async def _before_hooks(self, record: TurnRecord, call: CallState) -> GateDecision | None:
        """A ``before_function_call`` subscriber's block, or ``None`` (no cost with none)."""
        if self._hooks is None:
            return None
        result = await self._hooks.publish(BEFORE_FUNCTION_CALL, _call_payload(record, call))
        if result is None or not result.blocked:
            return None
        return GateDecision(
            "deny", "hook", result.reason or "blocked by a hook", rule_id=result.blocked_by
        )

    async def after_call(
        self, record: TurnRecord, call: CallState, result: FunctionResultMessage
    ) -> FunctionResultMessage:
        """``after_function_call`` hooks may rewrite the result; a failing one withholds it."""
        if self._hooks is None:
            return result
        payload = {**_call_payload(record, call), "result": result.model_dump(mode="json")}
        published = await self._hooks.publish(AFTER_FUNCTION_CALL, payload)
        if published is None:
            return result
        if published.blocked or not isinstance(published.payload, dict):
            return error_result(
                call,
                "The result was withheld: a hook that must process it failed"
                + (f" ({published.reason})" if published.reason else ""),
                details={"error": "hook_failed", "blocked_by": published.blocked_by},
            )
        try:
            return FunctionResultMessage.model_validate(published.payload.get("result"))
        except ValidationError as exc:
            return error_result(
                call,
                f"A hook returned an unreadable result: {exc}",
                details={"error": "hook_failed"},
            )

    async def _request_approval(
        self, record: TurnRecord, call: CallState, policy: GateDecision
    ) -> GateDecision:
        """Register the pending call; the session's approval mode may allow it at once."""
        assert self._approvals is not None
        try:
            request = ApprovalRequest(
                session_id=record.session_id,
                function_call_id=call.id,
                function_id=call.function_id,
                arguments=call.arguments,
                reason=policy.reason,
                run_id=record.run_id,
                approvers=policy.approvers,
                requester=record.principal,
            )
        except ValidationError as exc:
            return _no_approval(f"invalid request: {describe_validation_error(exc)}")
        try:
            reply = await self._approvals.call(self._engine, request, timeout=self._policy_timeout)
        except EngineError as exc:
            return _no_approval(str(exc))
        except ValidationError:
            return policy  # an answer nobody can read allows nothing: the call waits
        if reply.status == "allowed":
            reason = reply.reason or "allowed by the session's approval mode"
            return GateDecision("allow", "approval_mode", reason)
        return policy

    async def release_parked(self, before: TurnRecord, after: TurnRecord) -> None:
        """Tell the approvals worker that calls parked in ``before`` will not be decided (abort)."""
        if self._approvals is None:
            return
        for call in before.calls:
            if call.status != "parked":
                continue
            # Already decided or expired: nothing is left pending either way.
            with contextlib.suppress(EngineError, ValidationError):
                request = ResolveRequest(
                    session_id=before.session_id,
                    function_call_id=call.id,
                    decision="aborted",
                    reason=after.stop_reason or "the run ended",
                    approver="orchestrator",
                )
                await RESOLVE.send(self._engine, request, timeout=self._policy_timeout)

    async def _policy_check(
        self,
        record: TurnRecord,
        call: CallState,
        tool: ToolOffer | None,
        flow: ContextFlow | None,
    ) -> GateDecision:
        if self._policy is None:
            return GateDecision("needs_approval", "default", "no policy: every call asks")
        principal = record.principal
        facts = None
        if flow is not None:
            traits = ToolTraits() if tool is None else tool.traits
            facts = flow.facts(
                call.arguments,
                traits,
                system=record.system_prompt,
                hidden=record.mode == "planned",
            )
            if facts.context_untrusted:
                trace.get_current_span().set_attribute(
                    "tackroom.flow.untrusted_sources", facts.untrusted_sources
                )
        try:
            request = CheckRequest(
                function_id=call.function_id,
                args=call.arguments,
                session_id=record.session_id,
                principal=None if principal is None else principal.id,
                roles=[] if principal is None else list(principal.roles),
                required_permission=None if tool is None else tool.traits.required_permission,
                tenant=None if principal is None else principal.tenant,
                flow=facts,
            )
        except ValidationError as exc:
            return _unavailable(f"invalid request: {describe_validation_error(exc)}")
        try:
            reply = await self._policy.call(self._engine, request, timeout=self._policy_timeout)
        except ValidationError as exc:
            why = f"unreadable policy reply: {describe_validation_error(exc)}"
            return self._policy_failed(call, tool, why)
        except EngineError as exc:
            return self._policy_failed(call, tool, str(exc))
        constraint = reply.matched_constraint
        return GateDecision(
            reply.decision,
            "policy",
            reply.reason,
            rule_id=reply.rule_id,
            matched_constraint=None if constraint is None else constraint.model_dump(mode="json"),
            approvers=reply.approvers if reply.decision == "needs_approval" else None,
        )

    def _policy_failed(self, call: CallState, tool: ToolOffer | None, why: str) -> GateDecision:
        """The policy function failed: denied (closed), or allowed where the tool (else this
        gate) fails open — never a protected function. Either way a warning says so."""
        function_id = function_of(call)
        trait = None if tool is None else tool.traits.on_policy_error
        mode = trait or self._on_error
        if mode == "deny" or protected_by(function_id) is not None:
            _log.warning("policy check of %s failed, denied (fail closed): %s", function_id, why)
            return _unavailable(why)
        source = "the tool's on_policy_error" if trait else "the orchestrator's policy_on_error"
        _log.warning("policy check of %s failed, ALLOWED (fail open, %s): %s", function_id,
                     source, why)  # fmt: skip
        return GateDecision(
            "allow",
            "fail_open",
            f"the policy check failed, and {source} is allow, so the call is allowed: {why}",
        )

    def _over_cap(
        self, record: TurnRecord, tool: ToolOffer | None, batch: int
    ) -> GateDecision | None:
        cap = self._external_cap
        if cap is None or tool is None or tool.traits.effect != "external":
            return None
        if record.external_calls + batch < cap:
            return None
        return GateDecision(
            "deny",
            "cap",
            f"this run has made {cap} calls with external effects, its limit"
            f" (max_external_calls): {tool.function_id} does not run; start a new run to go on",
        )


def _builtin_denial(record: TurnRecord, tool: ToolOffer | None) -> GateDecision | None:
    """The checks no configuration turns off: the run's mode, and the tool's permission."""
    if tool is None:
        return None
    if record.mode in _LOOKING_MODES and not tool.traits.read_only:
        return GateDecision(
            "deny",
            "mode",
            f"{record.mode} mode: {tool.function_id} may change something, and in {record.mode}"
            " mode only read-only tools run (start the run in agent mode to let it act)",
        )
    if record.plan is not None and tool.function_id not in {*record.plan, *PLAN_READERS}:
        return GateDecision(
            "deny",
            "plan",
            f"{tool.function_id} is not in this run's plan, fixed from the request before"
            " anything untrusted was read (planned mode): only "
            + (", ".join(record.plan) or "the readers")
            + " may run; start a new run for anything else",
        )
    needed = tool.traits.required_permission
    if needed is None:
        return None
    principal = record.principal
    if principal is None:
        return GateDecision(
            "deny",
            "permission",
            f"{tool.function_id} requires the permission {needed!r}, and this run names no"
            " principal to hold it (start the run with a principal that has that role)",
        )
    if not principal.holds(needed):
        return GateDecision(
            "deny",
            "permission",
            f"{tool.function_id} requires the permission {needed!r}, which {principal.id!r}"
            " does not hold",
        )
    return None


def _no_approval(why: str) -> GateDecision:
    return GateDecision(
        "deny", "gate_unavailable", f"the approval request failed, so the call is denied: {why}"
    )


def _unavailable(why: str) -> GateDecision:
    return GateDecision(
        "deny", "gate_unavailable", f"the policy check failed, so the call is denied: {why}"
    )


def denial(call: CallState, decision: GateDecision) -> FunctionResultMessage:
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


def _call_payload(record: TurnRecord, call: CallState) -> dict[str, Any]:
    return {
        "session_id": record.session_id,
        "run_id": record.run_id,
        "function_call_id": call.id,
        "function_id": call.function_id,
        "arguments": call.arguments,
    }


def _compact_json(value: Any) -> str:
    """JSON text without spaces, for where only a string fits (a span attribute)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
