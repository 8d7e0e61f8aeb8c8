"""``GET /v1/runs``: the caller's tenant's runs across sessions, newest first, filtered by status,
model, tool, cost, time and principal — each run as its stored events tell it
(:mod:`.history`)."""

from __future__ import annotations

import fnmatch
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts import sessions as tree
from tackroom.workers.gateway.access import may, owned
from tackroom.workers.gateway.history import RunStatus, RunSummary, runs_of, stored_events
from tackroom.workers.gateway.inputs import query
from tackroom.workers.gateway.operations import Operation, Query
from tackroom.workers.gateway.service import gateway_of, reply

__all__ = ["OPERATIONS", "RunList", "RunsQuery"]

SESSIONS_SCANNED = 500
"""The newest sessions whose runs a listing reads."""


class RunsQuery(Query):
    status: RunStatus | None = Field(
        default=None, description="running, waiting (for approval), stopped or failed"
    )
    model: str | None = Field(
        default=None, max_length=200, description="a substring of provider:model"
    )
    tool: str | None = Field(
        default=None, max_length=200, description="a function id the run called; * globs (fs::*)"
    )
    principal: str | None = Field(
        default=None, max_length=200, description="the id of whom the run acted for"
    )
    min_cost: float | None = Field(default=None, ge=0, description="USD, at least")
    max_cost: float | None = Field(default=None, ge=0, description="USD, at most")
    since: datetime | None = Field(
        default=None, description="started at or after (ISO 8601, or seconds since the epoch)"
    )
    until: datetime | None = Field(default=None, description="started at or before")
    limit: int = Field(default=50, ge=1, le=500)


class RunList(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    schema_version: int = 1
    runs: list[RunSummary] = Field(description="newest first")
    sessions_scanned: int
    truncated: bool = Field(
        description=f"true: more sessions than the newest {SESSIONS_SCANNED} exist, or more runs"
        " match than limit"
    )


def _wanted(run: RunSummary, params: RunsQuery) -> bool:
    checks = (
        params.status is None or run.status == params.status,
        params.model is None or any(params.model.casefold() in m.casefold() for m in run.models),
        params.tool is None or any(fnmatch.fnmatchcase(t, params.tool) for t in run.tools),
        params.principal is None or run.principal == params.principal,
        params.min_cost is None or run.usage.cost_usd >= params.min_cost,
        params.max_cost is None or run.usage.cost_usd <= params.max_cost,
        params.since is None or run.started_at >= params.since.timestamp(),
        params.until is None or run.started_at <= params.until.timestamp(),
    )
    return all(checks)


async def list_runs(request: Request) -> Response:
    gateway = gateway_of(request)
    principal = await may(request, "read", "session")
    params = query(request, RunsQuery)
    found: list[RunSummary] = []
    scanned = 0
    cursor: str | None = None
    more = True
    while more and scanned < SESSIONS_SCANNED:
        page = await gateway.call(
            tree.LIST, tree.ListRequest(limit=100, cursor=cursor, order="desc")
        )
        for info in page.sessions:
            if scanned >= SESSIONS_SCANNED or not owned(principal, info.session_id):
                continue
            scanned += 1
            events = await stored_events(gateway, info.session_id)
            found.extend(run for run in runs_of(info.session_id, events) if _wanted(run, params))
        cursor = page.next_cursor
        more = cursor is not None
    found.sort(key=lambda run: run.started_at, reverse=True)
    return reply(
        RunList(
            runs=found[: params.limit],
            sessions_scanned=scanned,
            truncated=len(found) > params.limit or (more and scanned >= SESSIONS_SCANNED),
        )
    )


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/runs",
        endpoint=list_runs,
        operation_id="listRuns",
        summary="Runs across the caller's sessions, newest first, filtered by status, model,"
        " tool, cost, time and principal",
        tag="runs",
        query=RunsQuery,
        response=RunList,
    ),
)
