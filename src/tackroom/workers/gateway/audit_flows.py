"""``GET /v1/audit/flows?source=GLOB``: what the caller's tenant's runs did after they read
untrusted content from a source (:mod:`tackroom.kit.flows`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts.auditflows import FlowReport
from tackroom.engine.errors import EngineError
from tackroom.kit.flows import flows_report
from tackroom.workers.gateway.access import may
from tackroom.workers.gateway.errors import bus_error
from tackroom.workers.gateway.inputs import query
from tackroom.workers.gateway.operations import Operation, Query
from tackroom.workers.gateway.service import gateway_of, reply

__all__ = ["OPERATIONS", "FlowsQuery"]

MAX_SESSIONS = 1000
"""The newest sessions a query reads."""


class FlowsQuery(Query):
    source: str = Field(
        min_length=1,
        max_length=200,
        description="a glob over the origins of untrusted content: http::fetch, mcp::mail::*,"
        " file:*",
    )
    since: datetime | None = Field(
        default=None, description="runs active at or after (ISO 8601, or seconds since the epoch)"
    )


async def list_flows(request: Request) -> Response:
    gateway = gateway_of(request)
    principal = await may(request, "read", "session")
    params = query(request, FlowsQuery)
    since = None if params.since is None else params.since.timestamp()
    try:
        report = await flows_report(
            gateway.engine,
            source=params.source,
            tenant=principal.tenant,
            since=since,
            max_sessions=MAX_SESSIONS,
        )
    except EngineError as exc:
        raise bus_error(exc) from None
    return reply(report)


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/audit/flows",
        endpoint=list_flows,
        operation_id="listFlows",
        summary="What runs did after they read untrusted content from a source: each call the"
        " model asked for afterwards, its gate decision and rule, and whether it ran",
        tag="audit",
        query=FlowsQuery,
        response=FlowReport,
    ),
)
