"""What the caller may do, and which sessions are theirs: every route asks here first.

A route names its action (``read``, ``run``, ``approve``…) on a kind of resource; the policy
worker decides (``policy::authorize``: the ``access:`` rules of the policy file, or Cedar); a
denial is a 403 that says why, and an audit fact (``access_denied``). No policy worker answering
is a 503, never an allow. A session id in a path or body is the caller's tenant's
(:func:`tackroom.contracts.tenancy.qualify`): another tenant's session is never reached, and
answers exactly as a missing one does.
"""

from __future__ import annotations

import time
import uuid

from starlette.requests import Request

from tackroom.contracts.audit import AuditFact
from tackroom.contracts.policy import (
    AUTHORIZE,
    AuthorizeRequest,
    AuthorizeResponse,
    ResourceAction,
    ResourceKind,
    ResourceRef,
)
from tackroom.contracts.principal import Principal
from tackroom.contracts.tenancy import owns, qualify
from tackroom.engine.errors import FunctionError
from tackroom.kit.audit import record_fact
from tackroom.kit.workspace import check_session_name
from tackroom.workers.gateway.errors import ApiError
from tackroom.workers.gateway.identity import principal_of
from tackroom.workers.gateway.inputs import path_id
from tackroom.workers.gateway.service import gateway_of

__all__ = [
    "authorize",
    "may",
    "may_on_session",
    "named_session",
    "new_session",
    "owned",
]

_DECISION_TIMEOUT = 5.0


async def may(
    request: Request,
    action: ResourceAction,
    kind: ResourceKind,
    resource_id: str | None = None,
    *,
    principal: Principal | None = None,
) -> Principal:
    """The caller, once the policy allows it ``action`` on the resource (else a 403)."""
    principal = principal or principal_of(request)
    answer = await authorize(request, principal, action, kind, resource_id)
    if answer.decision != "allow":
        await record_fact(
            gateway_of(request).engine, _denial(principal, action, kind, resource_id, answer)
        )
        raise ApiError(
            403,
            "forbidden",
            answer.reason or f"{principal.id!r} may not {action.replace('_', ' ')} here",
            details={"action": action, "rule_id": answer.rule_id},
        )
    return principal


async def may_on_session(
    request: Request, action: ResourceAction, name: str = "sid"
) -> tuple[Principal, str]:
    """The caller and the stored id of the session the path names, once ``action`` is allowed."""
    principal = principal_of(request)
    session_id = named_session(principal, path_id(request, name))
    await may(request, action, "session", session_id, principal=principal)
    return principal, session_id


async def authorize(
    request: Request,
    principal: Principal,
    action: ResourceAction,
    kind: ResourceKind,
    resource_id: str | None,
) -> AuthorizeResponse:
    """The policy's answer; fails closed (503) when no policy worker answers."""
    gateway = gateway_of(request)
    resource = ResourceRef(kind=kind, id=resource_id, tenant=principal.tenant)
    question = AuthorizeRequest(principal=principal, action=action, resource=resource)
    try:
        return await gateway.call(AUTHORIZE, question, timeout=_DECISION_TIMEOUT)
    except ApiError as exc:
        raise ApiError(
            503,
            "policy_unavailable",
            f"no decision from {AUTHORIZE.id} ({exc.message}): boot the policy or policy-cedar"
            " worker; nothing is allowed without it",
        ) from None


def _denial(
    principal: Principal,
    action: ResourceAction,
    kind: ResourceKind,
    resource_id: str | None,
    answer: AuthorizeResponse,
) -> AuditFact:
    """The audit fact of a refused request (an allowed one is not recorded: every read would
    be)."""
    return AuditFact(
        fact_id=f"access_denied:{uuid.uuid4().hex}",
        kind="access_denied",
        principal=principal,
        session_id=resource_id if kind == "session" else None,
        at=time.time(),
        fact={"action": action, "resource": kind, "id": resource_id, "rule_id": answer.rule_id},
    )


def named_session(principal: Principal, session_id: str) -> str:
    """The stored id of a session the caller names."""
    return qualify(principal.tenant, session_id)


def new_session(principal: Principal, session_id: str) -> str:
    """The stored id of a session the caller names to create (a run's, a fork's): refused when
    it could not name the session's workspace (``.``, ``..``, too long)."""
    stored = qualify(principal.tenant, session_id)
    try:
        check_session_name(stored, code="invalid_request")
    except FunctionError:
        raise ApiError(
            422,
            "invalid_request",
            f"session id {session_id!r} cannot name a session: not '.' or '..', and at most 200"
            f" bytes with its tenant ({principal.tenant!r})",
            details={"field": "session_id"},
        ) from None
    return stored


def owned(principal: Principal, session_id: str) -> bool:
    return owns(principal.tenant, session_id)
