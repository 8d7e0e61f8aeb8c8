"""``policy::authorize`` in Cedar: who may do what to a resource, decided by an access policy file.

The access policies are a policy set of their own (``access.cedar``, else the shipped
``defaults_access.cedar``), apart from the tool-call policies: a tool-call policy written with
an unconstrained ``action`` keeps meaning tool calls only, and each file names only its own
actions and entity types (a typo is a load error, not a rule that never applies).

The request Cedar sees:

- **principal**: ``Principal::"<id>"`` with ``tenant``, ``roles`` (a set), ``method`` (how it
  signed in: ``api_key``, ``oidc``…) and ``on_behalf_of`` (only when it is impersonated: test
  with ``has``); it is in ``Role::"<role>"`` for each role it holds.
- **action**: ``Action::"read"``, ``"stream"``, ``"run"``, ``"fork"``, ``"pin"``,
  ``"compact"``, ``"delete"``, ``"approve"``, ``"budget_admin"`` or ``"abort_runs"`` (the
  tenant's kill switch).
- **resource**: ``Session``, ``Approval``, ``Budget``, ``Trace`` or ``Catalog``, by kind, whose
  id is the resource's (``""`` when the request names none, e.g. a list), with ``tenant``.
- **context**: empty.

Decision: another tenant's resource is denied first (``builtin:tenant``); a ``forbid`` in error
denies (fail closed); a permit → ``allow``; a forbid → ``deny`` with its ``@id``; nothing →
``deny`` (``builtin:default``), Cedar's own default.
"""

from __future__ import annotations

import re
from typing import Any

import cedarpy

from tackroom.contracts.policy import (
    RESOURCE_ACTIONS,
    AuthorizeRequest,
    AuthorizeResponse,
    ResourceKind,
    access_default_verdict,
    tenant_verdict,
)
from tackroom.workers.policy_cedar.policies import CedarPolicies, PolicyInfo, parse_policies

__all__ = [
    "ACCESS_ENTITY_TYPES",
    "RESOURCE_TYPES",
    "AccessAnswers",
    "access_entities",
    "access_request",
    "decide_access",
    "parse_access",
]

RESOURCE_TYPES: dict[ResourceKind, str] = {
    "session": "Session",
    "approval": "Approval",
    "budget": "Budget",
    "trace": "Trace",
    "catalog": "Catalog",
}
ACCESS_ENTITY_TYPES = ("Principal", "Role", *RESOURCE_TYPES.values(), "Action")

_ERRORED = re.compile(r"policy `([^`]+)`")
_MAX_ANSWERS = 4096


def parse_access(text: str, path: str, *, schema: cedarpy.Schema | None = None) -> CedarPolicies:
    """An access policy file: only the resource actions and entity types, no approvers."""
    return parse_policies(
        text,
        path,
        schema=schema,
        entity_types=ACCESS_ENTITY_TYPES,
        actions=RESOURCE_ACTIONS,
        approvers=False,
    )


def _uid(kind: str, ident: str) -> dict[str, str]:
    return {"type": kind, "id": ident}


def _resource_uid(request: AuthorizeRequest) -> dict[str, str]:
    return _uid(RESOURCE_TYPES[request.resource.kind], request.resource.id or "")


def access_entities(request: AuthorizeRequest) -> list[dict[str, Any]]:
    """The principal, its roles and the resource."""
    principal = request.principal
    roles = list(dict.fromkeys(principal.roles))
    attrs: dict[str, Any] = {
        "tenant": principal.tenant,
        "roles": roles,
        "method": principal.method,
    }
    if principal.on_behalf_of is not None:
        attrs["on_behalf_of"] = principal.on_behalf_of
    return [
        {
            "uid": _uid("Principal", principal.id),
            "attrs": attrs,
            "parents": [_uid("Role", role) for role in roles],
        },
        *({"uid": _uid("Role", role), "attrs": {}, "parents": []} for role in roles),
        {
            "uid": _resource_uid(request),
            "attrs": {"tenant": request.resource.tenant},
            "parents": [],
        },
    ]


def access_request(request: AuthorizeRequest) -> dict[str, Any]:
    return {
        "principal": _uid("Principal", request.principal.id),
        "action": _uid("Action", request.action),
        "resource": _resource_uid(request),
        "context": {},
    }


def _first(policies: CedarPolicies, ids: list[str], effect: str) -> PolicyInfo | None:
    wanted = set(ids)
    return next(
        (i for i in policies.policies.values() if i.policy_id in wanted and i.effect == effect),
        None,
    )


def decide_access(policies: CedarPolicies, request: AuthorizeRequest) -> AuthorizeResponse:
    crossing = tenant_verdict(request)
    if crossing is not None:
        return crossing
    result = cedarpy.is_authorized(
        access_request(request), policies.policy_set, access_entities(request)
    )
    errors = list(result.diagnostics.errors)
    errored = [m.group(1) for error in errors if (m := _ERRORED.search(error))]
    broken = _first(policies, errored, "forbid")
    if broken is not None:
        detail = next(e for e in errors if f"`{broken.policy_id}`" in e)
        return AuthorizeResponse(
            decision="deny",
            rule_id=broken.rule_id,
            reason=f"Cedar policy {broken.rule_id!r} could not be evaluated, so the action is"
            f" denied: {' '.join(detail.split())}",
        )
    if result.decision == cedarpy.Decision.NoDecision:
        return AuthorizeResponse(
            decision="deny",
            reason=f"Cedar could not evaluate the request: {' '.join('; '.join(errors).split())}",
        )
    reasons = list(result.diagnostics.reasons)
    if result.allowed:
        info = _first(policies, reasons, "permit")
        if info is not None:
            return AuthorizeResponse(
                decision="allow",
                rule_id=info.rule_id,
                reason=info.reason or f"Cedar policy {info.rule_id!r} permits {request.action}",
            )
    forbid = _first(policies, reasons, "forbid")
    if forbid is not None:
        return AuthorizeResponse(
            decision="deny",
            rule_id=forbid.rule_id,
            reason=forbid.reason or f"Cedar policy {forbid.rule_id!r} forbids {request.action}",
        )
    return access_default_verdict(request)


class AccessAnswers:
    """The decisions of the policy set in force, kept per request (a Cedar evaluation is a
    tenth of a millisecond; the same caller asking about the same resource again is a look-up).
    A new policy set starts afresh; past :data:`_MAX_ANSWERS` the answers start over."""

    __slots__ = ("_answers", "_policies")

    def __init__(self) -> None:
        self._policies: CedarPolicies | None = None
        self._answers: dict[tuple[Any, ...], AuthorizeResponse] = {}

    def decide(self, policies: CedarPolicies, request: AuthorizeRequest) -> AuthorizeResponse:
        if policies is not self._policies:
            self._policies = policies
            self._answers.clear()
        resource = request.resource
        key = (request.principal, request.action, resource.kind, resource.id, resource.tenant)
        answer = self._answers.get(key)
        if answer is None:
            if len(self._answers) >= _MAX_ANSWERS:
                self._answers.clear()
            answer = self._answers[key] = decide_access(policies, request)
        return answer
