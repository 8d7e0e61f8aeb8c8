"""Routes of traces: what a trace store (the ``traces`` worker) answers, passed through; and
:class:`Untraced`, which keeps reads out of it: a console page read makes no trace."""

from __future__ import annotations

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tackroom.contracts import traces
from tackroom.contracts.principal import DEFAULT_TENANT, Principal
from tackroom.engine.trace_context import untraced
from tackroom.workers.gateway.access import may, named_session, owned
from tackroom.workers.gateway.errors import ApiError
from tackroom.workers.gateway.inputs import query
from tackroom.workers.gateway.operations import Operation, Query
from tackroom.workers.gateway.service import gateway_of, reply

__all__ = ["OPERATIONS", "Untraced"]

_READS = frozenset({"GET", "HEAD"})


class Untraced:
    """ASGI middleware: a read (``GET``, ``HEAD``) runs outside any trace, and so does every
    call it makes on the bus — browsing the console fills no one's trace list. Writes (a run
    started, an approval) are traced as ever."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _READS:
            await self.app(scope, receive, send)
            return
        with untraced():
            await self.app(scope, receive, send)


class TracesQuery(Query):
    session_id: str | None = Field(default=None, max_length=200)
    run_id: str | None = Field(default=None, max_length=200)
    limit: int = Field(default=50, ge=1, le=1000)


async def list_traces(request: Request) -> Response:
    """The caller's tenant's traces: those of its sessions."""
    gateway = gateway_of(request)
    principal = await may(request, "read", "trace")
    params = query(request, TracesQuery)
    named = params.session_id
    found = await gateway.call(
        traces.LIST,
        traces.ListRequest(
            session_id=None if named is None else named_session(principal, named),
            run_id=params.run_id,
            limit=params.limit,
        ),
    )
    mine = [t for t in found.traces if _visible(principal, t.session_id)]
    groups = [g for g in found.sessions if _visible(principal, g.session_id)]
    return reply(found.model_copy(update={"traces": mine, "sessions": groups}))


async def get_trace(request: Request) -> Response:
    gateway = gateway_of(request)
    principal = await may(request, "read", "trace")
    trace_id: str = request.path_params["trace_id"]
    if not _is_trace_id(trace_id):
        raise ApiError(
            422,
            "invalid_request",
            "path.trace_id: 32 lowercase hexadecimal digits",
            details={"field": "path.trace_id"},
        )
    detail = await gateway.call(traces.GET, traces.GetRequest(trace_id=trace_id))
    if not _visible(principal, detail.session_id):
        raise ApiError(
            404,
            traces.NOT_FOUND,
            f"no trace {trace_id} in the store (never stored, or past retention)",
            details={"function_id": traces.GET.id},
        )
    return reply(detail)


def _visible(principal: Principal, session_id: str | None) -> bool:
    """A session's traces are its tenant's; the traces of no session (cron, the harness's own
    work) are the default tenant's admins'."""
    if session_id is None:
        return principal.tenant == DEFAULT_TENANT and principal.holds("admin")
    return owned(principal, session_id)


def _is_trace_id(value: str) -> bool:
    return len(value) == 32 and all(c in "0123456789abcdef" for c in value)


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/traces",
        endpoint=list_traces,
        operation_id="listTraces",
        summary="Recent traces, newest first (traces::list)",
        tag="traces",
        query=TracesQuery,
        response=traces.TraceList,
    ),
    Operation(
        method="GET",
        path="/v1/traces/{trace_id}",
        endpoint=get_trace,
        operation_id="getTrace",
        summary="Every span of one trace (traces::get)",
        tag="traces",
        response=traces.TraceDetail,
    ),
)
