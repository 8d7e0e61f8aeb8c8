"""Routes of approvals: the calls waiting for a person, and their decision."""

from __future__ import annotations

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts import approvals
from tackroom.contracts.gateway import DecisionBody
from tackroom.contracts.principal import Principal
from tackroom.workers.gateway.access import may, named_session, owned
from tackroom.workers.gateway.errors import ApiError
from tackroom.workers.gateway.identity import principal_of
from tackroom.workers.gateway.inputs import json_body, path_id, query
from tackroom.workers.gateway.operations import Operation, Query
from tackroom.workers.gateway.runs import IMPERSONATE
from tackroom.workers.gateway.service import gateway_of, reply

__all__ = ["OPERATIONS"]


class PendingQuery(Query):
    session_id: str | None = Field(
        default=None, pattern=approvals.ID_PATTERN, description="only this session's calls"
    )


async def list_pending(request: Request) -> Response:
    """The caller's tenant's waiting calls."""
    gateway = gateway_of(request)
    principal = await may(request, "read", "approval")
    params = query(request, PendingQuery)
    named = params.session_id
    pending = await gateway.call(
        approvals.LIST_PENDING,
        approvals.ListPendingRequest(
            session_id=None if named is None else named_session(principal, named)
        ),
    )
    mine = [call for call in pending.pending if owned(principal, call.session_id)]
    return reply(pending.model_copy(update={"pending": mine}))


async def decide(request: Request) -> Response:
    """``always`` (with ``allow``) allows the call's function for the rest of the session first,
    so the run, once woken, does not stop again at the next call of it."""
    gateway = gateway_of(request)
    principal = principal_of(request)
    session_id = named_session(principal, path_id(request, "sid"))
    await may(request, "approve", "approval", session_id, principal=principal)
    call_id = path_id(request, "call_id")
    body = await json_body(request, DecisionBody, limit=gateway.config.max_body_bytes)
    if body.always and body.decision != "allow":
        raise ApiError(
            422,
            "invalid_request",
            "body.always: only an allow can be for the rest of the session",
            details={"field": "body.always"},
        )
    if body.always:
        known = await gateway.call(
            approvals.GET,
            approvals.GetRequest(session_id=session_id, function_call_id=call_id),
        )
        if known.pending is not None:
            await gateway.call(
                approvals.ALLOW_FOR_SESSION,
                approvals.AllowForSessionRequest(
                    session_id=session_id, function_id=known.pending.function_id
                ),
            )
    record = await gateway.call(
        approvals.RESOLVE,
        approvals.ResolveRequest(
            session_id=session_id,
            function_call_id=call_id,
            decision=body.decision,
            reason=body.reason,
            principal=_approver(principal, body.approver),
        ),
    )
    return reply(record, status=202 if record.status == "pending" else 200)


def _approver(principal: Principal, named: str | None) -> Principal:
    """The approver is who the credential says; deciding as another (recorded as acting on its
    behalf) needs ``impersonate``."""
    if named is None or named == principal.id:
        return principal
    if not principal.holds(IMPERSONATE):
        raise ApiError(
            403,
            "forbidden",
            f"body.approver: {principal.id!r} may not decide as {named!r} (that needs the"
            f" {IMPERSONATE!r} role); leave it out to decide as yourself",
            details={"field": "body.approver"},
        )
    return principal.model_copy(update={"id": named, "on_behalf_of": principal.id})


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/approvals",
        endpoint=list_pending,
        operation_id="listApprovals",
        summary="The calls waiting for a person, oldest first (approval::list_pending)",
        tag="approvals",
        query=PendingQuery,
        response=approvals.ListPendingResponse,
    ),
    Operation(
        method="POST",
        path="/v1/approvals/{sid}/{call_id}",
        endpoint=decide,
        operation_id="decideApproval",
        summary="Allow or deny a waiting call (approval::resolve)",
        tag="approvals",
        body=DecisionBody,
        response=approvals.DecisionRecord,
        errors=(409,),
    ),
)
