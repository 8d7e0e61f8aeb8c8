"""The kill switch over HTTP: abort every run of the caller's tenant (or of one principal) and
refuse new ones until it is lifted (``runs::hold`` / ``runs::release``, served by the
orchestrator). Only for a caller the access rules grant ``abort_runs``; a tenant in the path that
is not the caller's answers exactly as a tenant that does not exist."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts._base import Strict
from tackroom.contracts.principal import Principal
from tackroom.contracts.runholds import (
    HOLD,
    HOLDS,
    RELEASE,
    HeldPrincipal,
    HoldRequest,
    HoldResponse,
    HoldsRequest,
    ReleaseRequest,
    ReleaseResponse,
    TenantHolds,
)
from tackroom.workers.gateway.access import may
from tackroom.workers.gateway.errors import ApiError
from tackroom.workers.gateway.identity import principal_of
from tackroom.workers.gateway.inputs import json_body
from tackroom.workers.gateway.operations import Operation
from tackroom.workers.gateway.service import gateway_of, reply

__all__ = ["OPERATIONS", "AbortRunsBody", "ResumeRunsBody"]


class AbortRunsBody(Strict):
    schema_version: Literal[1] = 1
    reason: str = Field(min_length=1, max_length=500, description="why (kept in the audit log)")
    principal: HeldPrincipal | None = Field(
        default=None,
        description="only this principal's runs (default: every run of the tenant)",
    )


class ResumeRunsBody(Strict):
    schema_version: Literal[1] = 1
    principal: HeldPrincipal | None = Field(
        default=None,
        description="lift this principal's switch (default: the tenant's)",
    )


async def _admin(request: Request) -> Principal:
    """The caller, once the tenant in the path is its own and it may abort runs there."""
    principal = principal_of(request)
    tenant = request.path_params.get("tenant")
    if tenant != principal.tenant:
        raise ApiError(404, "not_found", f"no tenant {tenant!r}")
    return await may(request, "abort_runs", "session", principal=principal)


async def abort_runs(request: Request) -> Response:
    gateway = gateway_of(request)
    principal = await _admin(request)
    body = await json_body(request, AbortRunsBody, limit=gateway.config.max_body_bytes)
    held = HoldRequest(
        tenant=principal.tenant, principal=body.principal, reason=body.reason, actor=principal
    )
    answer = await gateway.call(HOLD, held)
    return reply(answer)


async def resume_runs(request: Request) -> Response:
    gateway = gateway_of(request)
    principal = await _admin(request)
    body = await json_body(request, ResumeRunsBody, limit=gateway.config.max_body_bytes)
    lifted = ReleaseRequest(tenant=principal.tenant, principal=body.principal, actor=principal)
    answer = await gateway.call(RELEASE, lifted)
    return reply(answer)


async def run_holds(request: Request) -> Response:
    gateway = gateway_of(request)
    principal = await _admin(request)
    answer = await gateway.call(HOLDS, HoldsRequest(tenant=principal.tenant))
    return reply(answer)


OPERATIONS = (
    Operation(
        method="POST",
        path="/v1/tenants/{tenant}/abort-runs",
        endpoint=abort_runs,
        operation_id="abortTenantRuns",
        summary="Kill switch: abort every run of the tenant (or of one principal) and refuse new"
        " ones until resumed (runs::hold)",
        tag="runs",
        body=AbortRunsBody,
        response=HoldResponse,
    ),
    Operation(
        method="POST",
        path="/v1/tenants/{tenant}/resume-runs",
        endpoint=resume_runs,
        operation_id="resumeTenantRuns",
        summary="Lift the kill switch: the tenant's (or principal's) runs may start again"
        " (runs::release)",
        tag="runs",
        body=ResumeRunsBody,
        response=ReleaseResponse,
    ),
    Operation(
        method="GET",
        path="/v1/tenants/{tenant}/run-holds",
        endpoint=run_holds,
        operation_id="listRunHolds",
        summary="The kill switches that are on for the tenant (runs::holds)",
        tag="runs",
        response=TenantHolds,
    ),
)
