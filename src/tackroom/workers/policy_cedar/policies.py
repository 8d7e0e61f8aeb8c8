"""Cedar policies: parse a policy file, and decide one check with it.

A check asks Cedar twice, in one batch (see :mod:`~tackroom.workers.policy_cedar.mapping`):

1. a protected function is denied first (``builtin:protected``), as by every policy worker;
2. a ``forbid`` policy that could not be evaluated (a type error, a missing attribute read
   without ``has``) denies: Cedar skips a policy in error, so a forbid that errors would
   otherwise let the call through — here it fails closed, unless the worker's ``on_error`` is
   ``allow`` (fail open: ``rule_id: builtin:on_error``, the reason names the policy);
3. ``Action::"call"`` allowed → ``allow``;
4. ``Action::"call_with_approval"`` allowed → ``needs_approval``;
5. a ``forbid`` that applied to either → ``deny``;
6. nothing applied → the default decision.

``rule_id`` is the deciding policy's ``@id("...")`` annotation (else Cedar's ``policyN``), the
``reason`` its ``@reason("...")`` annotation (else a sentence naming it); a ``needs_approval``
carries the deciding permit's approvers (:mod:`~tackroom.workers.policy_cedar.approvers`).

With a schema (the worker's ``validate_schema``), a file must also validate against it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import cedarpy

from tackroom.contracts.approvers import ApproverRules
from tackroom.contracts.policy import (
    DEFAULT_RULE_ID,
    CheckRequest,
    CheckResponse,
    Decision,
    error_verdict,
    protected_verdict,
)
from tackroom.contracts.tools import OnPolicyError
from tackroom.kit.rulesfile import PolicyFileError
from tackroom.workers.policy_cedar.approvers import PREFIX, approvers_of
from tackroom.workers.policy_cedar.mapping import (
    ACTION_CALL,
    ACTIONS,
    ENTITY_TYPES,
    cedar_requests,
    entities_for,
)

__all__ = ["CedarPolicies", "PolicyInfo", "decide", "parse_policies"]

_MAX_LOCATE_LINES = 2000
_ERRORED = re.compile(r"policy `([^`]+)`")


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    policy_id: str
    """Cedar's positional id, ``policy0``, ``policy1``, ..."""
    effect: Literal["permit", "forbid"]
    rule_id: str
    reason: str | None
    approvers: ApproverRules | None = None


@dataclass(frozen=True, slots=True)
class CedarPolicies:
    policy_set: cedarpy.PolicySet
    policies: dict[str, PolicyInfo]
    """By Cedar policy id, in file order."""


# -- parsing -------------------------------------------------------------------------------------


def _locate(text: str, message: str) -> int | None:
    """The line of a parse error, best effort: the first prefix of the file that fails the same
    way (cedarpy reports no position)."""
    lines = text.splitlines(keepends=True)
    if "end of input" in message:
        return max(len(lines), 1)
    if len(lines) > _MAX_LOCATE_LINES:
        return None
    for end in range(1, len(lines) + 1):
        try:
            cedarpy.PolicySet.from_str("".join(lines[:end]))
        except ValueError as exc:
            if str(exc) == message:
                return end
    return None


def _line_of(text: str, needle: str, occurrence: int = 1) -> int | None:
    start = -1
    for _ in range(occurrence):
        start = text.find(needle, start + 1)
        if start < 0:
            return None
    return text.count("\n", 0, start) + 1


def _line_near(text: str, anchor: str, needle: str) -> int | None:
    """The line of ``needle`` after ``anchor`` (a policy's ``@id``), else of its first one."""
    start = max(text.find(anchor), 0)
    found = text.find(needle, start)
    if found < 0:
        found = text.find(needle)
    return None if found < 0 else text.count("\n", 0, found) + 1


def _uids(node: Any) -> Iterable[dict[str, Any]]:
    """Every entity uid (``{type, id}``) written in a policy's JSON form, and every type an
    ``is`` test names (as ``{type}``)."""
    if isinstance(node, dict):
        if set(node) == {"type", "id"} and all(isinstance(v, str) for v in node.values()):
            yield node
        if isinstance(node.get("entity_type"), str):
            yield {"type": node["entity_type"]}
        for value in node.values():
            yield from _uids(value)
    elif isinstance(node, list):
        for item in node:
            yield from _uids(item)


def parse_policies(
    text: str,
    path: str,
    *,
    schema: cedarpy.Schema | None = None,
    entity_types: tuple[str, ...] = ENTITY_TYPES,
    actions: tuple[str, ...] = ACTIONS,
    approvers: bool = True,
) -> CedarPolicies:
    """Parse a Cedar policy file; raise PolicyFileError (with a line when one is known).

    Besides Cedar's own parse errors, a file is rejected when it has templates (slots are
    never linked here), two policies share an ``@id``, it names an entity type or action
    this worker never sends (a typo such as ``Action::"cal"`` would silently never match), its
    approver annotations are wrong, or — with a ``schema`` — it does not validate against it.
    ``entity_types`` and ``actions`` are those of tool calls unless given (the access file's);
    ``approvers=False`` refuses approver annotations.
    """
    try:
        policy_set = cedarpy.PolicySet.from_str(text)
        est = json.loads(cedarpy.policies_to_json_str(text))
    except ValueError as exc:
        message = str(exc)
        raise PolicyFileError(path, f"Cedar: {message}", line=_locate(text, message)) from None
    if est.get("templates"):
        line = _line_of(text, "?principal") or _line_of(text, "?resource")
        raise PolicyFileError(
            path, "templates (?principal, ?resource) are not supported", line=line
        )
    policies: dict[str, PolicyInfo] = {}
    seen: dict[str, int] = {}
    for policy_id, policy in est.get("staticPolicies", {}).items():
        annotations = policy.get("annotations") or {}
        rule_id = annotations.get("id") or policy_id
        if rule_id in seen:
            seen[rule_id] += 1
            line = _line_of(text, f'@id("{rule_id}")', seen[rule_id])
            raise PolicyFileError(path, f"two policies have @id({rule_id!r})", line=line)
        seen[rule_id] = 1
        if rule_id.startswith("builtin:"):
            line = _line_of(text, f'@id("{rule_id}")')
            raise PolicyFileError(path, "ids starting with 'builtin:' are reserved", line=line)
        for uid in _uids(policy):
            if uid["type"] not in entity_types:
                known = ", ".join(entity_types)
                line = _line_of(text, uid["type"])
                reason = f"unknown entity type {uid['type']!r} (known: {known})"
                raise PolicyFileError(path, reason, line=line)
            if uid["type"] == "Action" and "id" in uid and uid["id"] not in actions:
                known = ", ".join(f'Action::"{a}"' for a in actions)
                line = _line_of(text, f'"{uid["id"]}"')
                reason = f'unknown action Action::"{uid["id"]}" (known: {known})'
                raise PolicyFileError(path, reason, line=line)
        try:
            if not approvers:
                for key in annotations:
                    if key.startswith(PREFIX):
                        raise ValueError(f"@{key}: approvers belong in the tool-call policy file")
            named = approvers_of(policy)
        except ValueError as exc:
            where = _line_near(text, f'@id("{rule_id}")', str(exc).split(":", 1)[0])
            raise PolicyFileError(path, f"policy {rule_id!r}: {exc}", line=where) from None
        policies[policy_id] = PolicyInfo(
            policy_id=policy_id,
            effect="forbid" if policy.get("effect") == "forbid" else "permit",
            rule_id=rule_id,
            reason=annotations.get("reason") or None,
            approvers=named,
        )
    if schema is not None:
        _validate(text, path, schema, policies)
    return CedarPolicies(policy_set=policy_set, policies=policies)


def _validate(
    text: str, path: str, schema: cedarpy.Schema, policies: dict[str, PolicyInfo]
) -> None:
    """The file against the schema: the first error, on the line of its policy's ``@id``."""
    result = cedarpy.validate_policies(text, schema)
    if result.validation_passed:
        return
    error = result.errors[0]
    info = policies.get(error.policy_id)
    rule_id = info.rule_id if info is not None else error.policy_id
    line = _line_of(text, f'@id("{rule_id}")') if info is not None else None
    reason = str(error.error).replace(f"for policy `{error.policy_id}`, ", "")
    raise PolicyFileError(path, f"policy {rule_id!r} does not fit the schema: {reason}", line=line)


# -- deciding ------------------------------------------------------------------------------------


def _first(policies: CedarPolicies, ids: Iterable[str], effect: str) -> PolicyInfo | None:
    wanted = set(ids)
    for info in policies.policies.values():
        if info.policy_id in wanted and info.effect == effect:
            return info
    return None


def _verdict(decision: Decision, info: PolicyInfo, what: str) -> CheckResponse:
    reason = info.reason or f"Cedar policy {info.rule_id!r} {what}"
    approvers = info.approvers if decision == "needs_approval" else None
    return CheckResponse(
        decision=decision, rule_id=info.rule_id, reason=reason, approvers=approvers
    )


def decide(
    policies: CedarPolicies,
    request: CheckRequest,
    *,
    default: Decision,
    on_error: OnPolicyError = "deny",
) -> CheckResponse:
    protected = protected_verdict(request.function_id)
    if protected is not None:
        return protected
    entities = entities_for(
        request.function_id, request.principal, roles=request.roles, tenant=request.tenant
    )
    results = cedarpy.is_authorized_batch(cedar_requests(request), policies.policy_set, entities)
    by_action = dict(zip(ACTIONS, results, strict=True))
    errors = [error for result in results for error in result.diagnostics.errors]
    errored = [m.group(1) for error in errors if (m := _ERRORED.search(error))]
    broken = _first(policies, errored, "forbid")
    if broken is not None:
        detail = next(e for e in errors if f"`{broken.policy_id}`" in e)
        if on_error == "allow":
            why = f"Cedar policy {broken.rule_id!r} could not be evaluated: {detail}"
            return error_verdict(on_error, request.function_id, why)
        return CheckResponse(
            decision="deny",
            rule_id=broken.rule_id,
            reason=f"Cedar policy {broken.rule_id!r} could not be evaluated, so the call is"
            f" denied: {detail}",
        )
    if any(result.decision == cedarpy.Decision.NoDecision for result in results):
        if on_error == "allow":
            why = f"Cedar could not evaluate the request: {'; '.join(errors)}"
            return error_verdict(on_error, request.function_id, why)
        return CheckResponse(
            decision="deny", reason=f"Cedar could not evaluate the request: {'; '.join(errors)}"
        )
    call = by_action[ACTION_CALL]
    ask = results[1]
    if call.allowed:
        info = _first(policies, call.diagnostics.reasons, "permit")
        if info is not None:
            return _verdict("allow", info, 'permits Action::"call"')
    if ask.allowed:
        info = _first(policies, ask.diagnostics.reasons, "permit")
        if info is not None:
            return _verdict("needs_approval", info, 'permits Action::"call_with_approval"')
    forbid = _first(policies, [*call.diagnostics.reasons, *ask.diagnostics.reasons], "forbid")
    if forbid is not None:
        return _verdict("deny", forbid, "forbids the call")
    return CheckResponse(
        decision=default,
        rule_id=DEFAULT_RULE_ID,
        reason=f"no Cedar policy applies to {request.function_id}; the default decision is"
        f" {default}",
    )
