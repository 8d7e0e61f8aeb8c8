"""The policy contract: its functions, payload models, error codes and the protected functions.

Every policy worker (``policy`` on YAML rules, ``policy-cedar`` on Cedar, or a replacement)
serves ``policy::check_permissions`` with these models and denies the protected functions before
any rule of its own, with ``rule_id: "builtin:protected"``. The contract suite in
``tackroom.testing.contracts.policy`` checks exactly this.

A ``needs_approval`` answer may name who may approve (``approvers``, an
:class:`~tackroom.contracts.approvers.ApproverRules`): the gate keeps it with the parked call and
the approvals worker enforces it. An answer without it is read as before (anyone may approve).

Policy workers also serve ``policy::authorize`` (:data:`AUTHORIZE`): may a principal do a
:data:`ResourceAction` (``read``, ``run``, ``approve``…) to a resource (:class:`ResourceRef`: a
session, an approval, a budget, a trace, the catalog)? The answer is ``allow`` or ``deny``; an
action on another tenant's resource is denied before any rule (``builtin:tenant``), and an action
no rule allows is denied (``builtin:default``): fail closed.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.approvers import ApproverRules
from tackroom.contracts.bus import Function
from tackroom.contracts.principal import TENANT_PATTERN, Principal
from tackroom.contracts.provenance import FlowFacts
from tackroom.contracts.tools import OnPolicyError

__all__ = [
    "AUTHORIZE",
    "CHECK_PERMISSIONS",
    "DEFAULT_RULE_ID",
    "ON_ERROR_RULE_ID",
    "POLICY_FILE_INVALID",
    "POLICY_RELOAD",
    "POLICY_STATUS",
    "PROTECTED_FUNCTIONS",
    "PROTECTED_RULE_ID",
    "RESOURCE_ACTIONS",
    "RESOURCE_KINDS",
    "TENANT_RULE_ID",
    "UNPROTECTED_READS",
    "AccessDecision",
    "AuthorizeRequest",
    "AuthorizeResponse",
    "CheckRequest",
    "CheckResponse",
    "Decision",
    "EmptyRequest",
    "LoadProblem",
    "MatchedConstraint",
    "PolicyStatus",
    "ResourceAction",
    "ResourceKind",
    "ResourceRef",
    "access_default_verdict",
    "access_denied_reason",
    "error_verdict",
    "function_glob",
    "protected_by",
    "protected_verdict",
    "tenant_verdict",
]

POLICY_FILE_INVALID = "policy_file_invalid"
"""The rules file does not parse or validate; the message names the line and the reason."""

PROTECTED_RULE_ID = "builtin:protected"
DEFAULT_RULE_ID = "builtin:default"
ON_ERROR_RULE_ID = "builtin:on_error"
"""The rule of an answer a policy worker gave because it could not decide (its ``on_error``)."""

Decision = Literal["allow", "deny", "needs_approval"]

PROTECTED_FUNCTIONS: tuple[str, ...] = (
    "approval::*",
    "policy::*",
    "auth::get_token",
    "auth::set_token",
    "auth::delete_token",
    "budget::*",
    "state::*",
    "stream::*",
    "engine::*",
    "run::*",
    "turn::*",
    "hook-fanout::*",
    "hook::*",
    "provider::*",
    "session-tree::*",
    "session-inbox::*",
    "models::reconcile",
    "directory::skills::register",
)
"""Functions no model may call, denied before any rule (globs: ``*`` matches anything).

Approvals and policy (a model must not approve its own calls or change its own rules),
credentials (reading a token hands a secret to the model; writing one hijacks a provider), budget
writes, and the harness's own machinery: state, streams, the engine catalog, runs and turns, hook
publishing and hook subscribers (a forged payload), raw provider calls (spend outside the budget),
the session tree and inbox (a model rewriting its own history), catalog reconciliation (prices
that budget estimates use) and skill registration. ``auth::list_providers``/``auth::status``
and the reads in :data:`UNPROTECTED_READS` are left to the rules."""

UNPROTECTED_READS: tuple[str, ...] = (
    "budget::list",
    "budget::get",
    "budget::usage",
    "budget::forecast",
)
"""Exact ids under a protected glob that only read, and so are left to the rules."""


@cache
def function_glob(pattern: str) -> re.Pattern[str]:
    """A function-id glob as a regex for ``fullmatch``: ``*`` matches anything (``::`` too),
    every other character only itself (``?``, ``[`` and regex metacharacters are literal)."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), flags=re.DOTALL)


def protected_by(function_id: str) -> str | None:
    """The protected glob that covers ``function_id``, or ``None``."""
    if function_id in UNPROTECTED_READS:
        return None
    for pattern in PROTECTED_FUNCTIONS:
        if function_glob(pattern).fullmatch(function_id):
            return pattern
    return None


class CheckRequest(_Model):
    """May the model's call ``function_id(args)`` run?"""

    schema_version: Literal[1] = 1
    function_id: str = Field(min_length=1, max_length=512, pattern=r"^[^\s\x00-\x1f\x7f]+$")
    args: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    principal: str | None = Field(
        default=None, description="Who the call acts for (a user or service id), when known."
    )
    roles: list[str] = Field(
        default_factory=list, description="The principal's roles, when a principal is known."
    )
    required_permission: str | None = Field(
        default=None,
        description="The tool's required permission (the gate has checked the roles hold it).",
    )
    tenant: str | None = Field(
        default=None,
        max_length=63,
        exclude_if=lambda value: value is None,
        description="The principal's tenant, when a principal is known.",
    )
    flow: FlowFacts | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The call's data flow (untrusted content, copied arguments), when known.",
    )


class MatchedConstraint(_Model):
    """The argument constraint that decided, e.g. ``{arg: "path", op: "under", value: "notes"}``."""

    arg: str
    op: str
    value: Any


class CheckResponse(_Model):
    schema_version: Literal[1] = 1
    decision: Decision
    rule_id: str | None = None
    matched_constraint: MatchedConstraint | None = None
    reason: str = Field(min_length=1)
    approvers: ApproverRules | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="needs_approval only: who may approve (roles, four eyes, quorum); absent:"
        " anyone",
    )

    @model_validator(mode="after")
    def _approvers_only_when_asking(self) -> CheckResponse:
        if self.approvers is not None and self.decision != "needs_approval":
            raise ValueError(f"approvers go with needs_approval only, not with {self.decision}")
        return self


def protected_verdict(function_id: str) -> CheckResponse | None:
    """The denial every policy worker gives a protected function first, or ``None``."""
    pattern = protected_by(function_id)
    if pattern is None:
        return None
    return CheckResponse(
        decision="deny",
        rule_id=PROTECTED_RULE_ID,
        reason=(
            f"{function_id} is protected ({pattern}): no model may call it, whatever the rules say"
        ),
    )


def error_verdict(on_error: OnPolicyError, function_id: str, why: str) -> CheckResponse:
    """The answer of a policy worker that could not decide ``function_id`` (its rules failed on
    the request): ``deny`` (fail closed), or ``allow`` as the worker's ``on_error`` says (fail
    open, never a protected function), with ``rule_id`` :data:`ON_ERROR_RULE_ID` and a reason
    the gate's decision and the audit log keep."""
    if on_error == "allow" and protected_by(function_id) is None:
        reason = f"the policy could not decide, and it fails open (on_error: allow): {why}"
        return CheckResponse(decision="allow", rule_id=ON_ERROR_RULE_ID, reason=reason)
    reason = f"the policy could not decide, so the call is denied (on_error: deny): {why}"
    return CheckResponse(decision="deny", rule_id=ON_ERROR_RULE_ID, reason=reason)


class EmptyRequest(_Model):
    pass


class LoadProblem(_Model):
    """Why the rules file was rejected (the rules in force before it stay)."""

    path: str
    line: int | None
    reason: str
    message: str
    """``path:line: reason``, as logged."""
    at: float
    """Unix time of the failed load."""


class PolicyStatus(_Model):
    schema_version: Literal[1] = 1
    language: str
    """``rules`` (YAML) or ``cedar``."""
    source: Literal["file", "builtin"]
    """``builtin``: the file was absent and the built-in defaults are in force."""
    path: str
    """The rules file watched (absolute), whether or not it exists."""
    digest: str
    """sha256 of the text in force."""
    generation: int
    """1 at start, +1 at each successful (re)load that changed the rules."""
    loaded_at: float
    rule_count: int
    default_decision: Decision
    reload_interval: float
    """Seconds between checks of the file; 0: no hot reload."""
    last_error: LoadProblem | None = None
    """The last rejected file, until a good one (or the file's removal) replaces it."""
    access: PolicyStatus | None = Field(default=None, exclude_if=lambda value: value is None)
    """The access rules of ``policy::authorize`` (their own file's, or the same file's with
    ``rule_count`` of access rules and ``source: builtin`` when the file has none); absent from
    a worker that does not say."""


CHECK_PERMISSIONS: Function[CheckRequest, CheckResponse] = Function(
    "policy::check_permissions",
    CheckRequest,
    CheckResponse,
    description="May a model's call run? allow | deny | needs_approval, with the rule.",
    hop=True,
)
"""The orchestrator calls it under its configured ``policy_function`` id (``.at(id)``)."""
POLICY_STATUS: Function[EmptyRequest, PolicyStatus] = Function(
    "policy::status",
    EmptyRequest,
    PolicyStatus,
    description="The rules in force, where they came from, and the last rejected file.",
)
"""``{}`` → :class:`PolicyStatus`: which rules are in force and the last load problem."""
POLICY_RELOAD: Function[EmptyRequest, PolicyStatus] = Function(
    "policy::reload",
    EmptyRequest,
    PolicyStatus,
    description="Read the rules file now; a bad file is rejected and the rules stay.",
)
"""``{}`` → :class:`PolicyStatus` after reading the rules file now; a bad file fails with
``policy_file_invalid`` and the rules in force stay."""


# -- who may do what to a resource: policy::authorize ---------------------------------------------

ResourceAction = Literal[
    "read",
    "stream",
    "run",
    "fork",
    "pin",
    "compact",
    "delete",
    "approve",
    "budget_admin",
    "abort_runs",
]
"""What a caller does to a resource (a gateway route names one): the actions access rules grant."""
RESOURCE_ACTIONS: tuple[ResourceAction, ...] = get_args(ResourceAction)

ResourceKind = Literal["session", "approval", "budget", "trace", "catalog"]
"""The kinds of resource an action is on."""
RESOURCE_KINDS: tuple[ResourceKind, ...] = get_args(ResourceKind)

AccessDecision = Literal["allow", "deny"]

TENANT_RULE_ID = "builtin:tenant"
"""The rule that denies a principal acting on another tenant's resource, before any rule."""


class ResourceRef(_Model):
    """What an action is on: a kind, the one resource's id (``None``: the kind as a whole, e.g. a
    list), and the tenant it belongs to."""

    kind: ResourceKind
    id: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="the resource's id as stored (a session's with its tenant); none: a list",
    )
    tenant: str = Field(pattern=TENANT_PATTERN, description="the tenant the resource belongs to")


class AuthorizeRequest(_Model):
    """May ``principal`` do ``action`` to ``resource``?"""

    schema_version: Literal[1] = 1
    principal: Principal
    action: ResourceAction
    resource: ResourceRef


class AuthorizeResponse(_Model):
    schema_version: Literal[1] = 1
    decision: AccessDecision
    rule_id: str | None = None
    """The deciding rule; ``builtin:tenant`` across tenants, ``builtin:default`` when none."""
    reason: str | None = None
    """One line for a person: ``viewer may not run here: ask for a role that grants it``."""


def _who(roles: tuple[str, ...] | list[str]) -> str:
    names = list(dict.fromkeys(roles))
    if not names:
        return "a principal with no role"
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} and {names[-1]}"


def access_denied_reason(roles: tuple[str, ...] | list[str], action: ResourceAction) -> str:
    """The reason of a denial no rule gave: ``viewer may not run here: ask for a role that
    grants it``."""
    return f"{_who(roles)} may not {action.replace('_', ' ')} here: ask for a role that grants it"


def access_default_verdict(request: AuthorizeRequest) -> AuthorizeResponse:
    """No rule allowed the action: denied (fail closed), ``builtin:default``."""
    return AuthorizeResponse(
        decision="deny",
        rule_id=DEFAULT_RULE_ID,
        reason=access_denied_reason(request.principal.roles, request.action),
    )


def tenant_verdict(request: AuthorizeRequest) -> AuthorizeResponse | None:
    """The denial every policy worker gives an action on another tenant's resource first (before
    any rule, whatever it says), or ``None`` when principal and resource share a tenant."""
    if request.principal.tenant == request.resource.tenant:
        return None
    return AuthorizeResponse(
        decision="deny",
        rule_id=TENANT_RULE_ID,
        reason=f"a principal of tenant {request.principal.tenant!r} may not act on another"
        f" tenant's {request.resource.kind}",
    )


AUTHORIZE: Function[AuthorizeRequest, AuthorizeResponse] = Function(
    "policy::authorize",
    AuthorizeRequest,
    AuthorizeResponse,
    description="May this principal do this action to this resource? allow | deny, with the rule.",
    hop=True,
)
"""``{principal, action, resource}`` → allow | deny. Another tenant's resource is denied first
(``builtin:tenant``); no rule allowing the action denies it (``builtin:default``)."""
