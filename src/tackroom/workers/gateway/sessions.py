"""Routes of sessions: list and search, show a page of the active path, the tree, fork, title,
delete (with its forks: ``?cascade=true``), and the session's event stream."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts import sessions as tree
from tackroom.contracts.gateway import RUN_ID_PATTERN, ForkBody, SessionDetail, SessionPage
from tackroom.contracts.principal import Principal
from tackroom.contracts.turn import TERMINAL_STATES, TURN_GET_STATE, TurnStateRequest
from tackroom.workers.gateway.access import may, may_on_session, new_session, owned
from tackroom.workers.gateway.errors import ApiError
from tackroom.workers.gateway.inputs import json_body, query
from tackroom.workers.gateway.operations import Operation, Query
from tackroom.workers.gateway.service import gateway_of, reply
from tackroom.workers.gateway.sse import MAX_CURSOR, parse_cursor

__all__ = ["OPERATIONS"]

_SEARCH_PAGES = 20
"""Pages of sessions a search reads at most per request before it answers (with a cursor)."""


class SessionsQuery(Query):
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str | None = Field(default=None, max_length=300)
    q: str | None = Field(
        default=None, max_length=200, description="a substring of the id or display name"
    )


class EntriesQuery(Query):
    limit: int = Field(default=100, ge=1, le=500)
    cursor: str | None = Field(default=None, max_length=200, description="an entry id")


class DeleteQuery(Query):
    cascade: bool = Field(
        default=False, description="delete the forks and clones sharing its history too"
    )


class TitleBody(BaseModel):
    """``PATCH /v1/sessions/{id}``: the session's new title (one line)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    title: str = Field(min_length=1, max_length=200)


class EventsQuery(Query):
    after: int | None = Field(
        default=None, ge=0, le=MAX_CURSOR, description="the id of the last event seen"
    )
    run_id: str | None = Field(
        default=None,
        pattern=RUN_ID_PATTERN,
        description="only this run's events; the stream ends after its agent_end",
    )


async def list_sessions(request: Request) -> Response:
    """The caller's tenant's sessions, newest first; with ``q``, those whose id or display name
    hold it (any case).

    A listing reads pages of ``limit`` sessions and answers with the matches of the first page
    that has any — never more than ``limit``, each page's cursor exact — or, after
    ``_SEARCH_PAGES`` pages without one, with none and the cursor to go on from."""
    gateway = gateway_of(request)
    principal = await may(request, "read", "session")
    params = query(request, SessionsQuery)
    needle = (params.q or "").casefold()
    cursor = params.cursor
    for _ in range(_SEARCH_PAGES):
        page = await gateway.call(
            tree.LIST, tree.ListRequest(limit=params.limit, cursor=cursor, order="desc")
        )
        found = [
            info
            for info in page.sessions
            if owned(principal, info.session_id) and _matches(info, needle)
        ]
        cursor = page.next_cursor
        if found or cursor is None:
            return reply(SessionPage(sessions=found, next_cursor=cursor))
    return reply(SessionPage(sessions=[], next_cursor=cursor))


def _matches(info: tree.SessionInfo, needle: str) -> bool:
    if not needle:
        return True
    names = (info.session_id, info.display_name or "")
    return any(needle in name.casefold() for name in names)


async def show_session(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "read")
    params = query(request, EntriesQuery)
    info = await gateway.call(tree.GET, tree.GetRequest(session_id=session_id))
    path = await gateway.call(tree.MESSAGES, tree.MessagesRequest(session_id=session_id))
    entries = path.messages
    start = 0
    if params.cursor:
        ids = [entry.entry_id for entry in entries]
        if params.cursor not in ids:
            raise ApiError(
                422,
                "invalid_cursor",
                f"cursor {params.cursor!r} is no entry of the active path of {session_id!r}",
                details={"field": "query.cursor"},
            )
        start = ids.index(params.cursor) + 1
    page = entries[start : start + params.limit]
    more = start + params.limit < len(entries)
    return reply(
        SessionDetail(
            session=info, entries=page, next_cursor=page[-1].entry_id if more and page else None
        )
    )


async def session_tree(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "read")
    found = await gateway.call(tree.TREE, tree.TreeRequest(session_id=session_id))
    return reply(found)


async def fork_session(request: Request) -> Response:
    gateway = gateway_of(request)
    principal, session_id = await may_on_session(request, "fork")
    body = await json_body(request, ForkBody, limit=gateway.config.max_body_bytes)
    new_id = body.new_session_id or uuid.uuid4().hex
    info = await gateway.call(
        tree.FORK,
        tree.ForkRequest(
            source_session_id=session_id,
            from_entry_id=body.entry_id,
            session_id=new_session(principal, new_id),
            display_name=body.display_name,
        ),
    )
    return reply(info, status=201)


async def delete_session(request: Request) -> Response:
    """Refused while a run is in flight (abort it first); the tree only (see the sessions
    worker's ``session-tree::delete``)."""
    gateway = gateway_of(request)
    principal, session_id = await may_on_session(request, "delete")
    view = await gateway.call_if_served(TURN_GET_STATE, TurnStateRequest(session_id=session_id))
    if view is not None and view.state not in TERMINAL_STATES:
        raise ApiError(
            409,
            "session_busy",
            f"session {session_id!r} has a run in flight ({view.state}): abort it first",
            details={"run_id": view.run_id},
        )
    params = query(request, DeleteQuery)
    await gateway.call(
        tree.DELETE,
        tree.DeleteRequest(
            session_id=session_id, requested_by=_who(principal), cascade=params.cascade
        ),
    )
    return reply(None, status=204)


async def retitle_session(request: Request) -> Response:
    """Set the session's title; another tenant's session is a 404, as a missing one."""
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "pin")  # curating the session, as a pin does
    body = await json_body(request, TitleBody, limit=gateway.config.max_body_bytes)
    info = await gateway.call(
        tree.SET_TITLE, tree.SetTitleRequest(session_id=session_id, title=body.title)
    )
    return reply(info)


def _who(principal: Principal) -> str:
    return f"{principal.tenant}/{principal.id}"


async def session_events(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "stream")
    params = query(request, EventsQuery)
    header = parse_cursor(request.headers.get("last-event-id"))
    after = header if header is not None else params.after or 0
    await gateway.call(tree.GET, tree.GetRequest(session_id=session_id))
    if request.method == "HEAD":
        return Response(media_type="text/event-stream")
    return gateway.streams.response(session_id, after=after, run_id=params.run_id)


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/sessions",
        endpoint=list_sessions,
        operation_id="listSessions",
        summary="Sessions, newest first, a page at a time; q searches ids and display names",
        tag="sessions",
        query=SessionsQuery,
        response=SessionPage,
    ),
    Operation(
        method="GET",
        path="/v1/sessions/{sid}",
        endpoint=show_session,
        operation_id="getSession",
        summary="A session and a page of its active path, root first",
        tag="sessions",
        query=EntriesQuery,
        response=SessionDetail,
    ),
    Operation(
        method="GET",
        path="/v1/sessions/{sid}/tree",
        endpoint=session_tree,
        operation_id="getSessionTree",
        summary="Every entry of a session and the history it shares, nested by branch",
        tag="sessions",
        response=tree.TreeResponse,
    ),
    Operation(
        method="POST",
        path="/v1/sessions/{sid}/fork",
        endpoint=fork_session,
        operation_id="forkSession",
        summary="A new session sharing this one's history up to entry_id",
        tag="sessions",
        body=ForkBody,
        response=tree.SessionInfo,
        status=201,
        errors=(409,),
    ),
    Operation(
        method="DELETE",
        path="/v1/sessions/{sid}",
        endpoint=delete_session,
        operation_id="deleteSession",
        summary="Delete a session's tree: metadata, own entries, inboxes (with cascade: its"
        " forks' too)",
        tag="sessions",
        query=DeleteQuery,
        status=204,
        errors=(409,),
    ),
    Operation(
        method="PATCH",
        path="/v1/sessions/{sid}",
        endpoint=retitle_session,
        operation_id="setSessionTitle",
        summary="Set a session's title (session-tree::set_title)",
        tag="sessions",
        body=TitleBody,
        response=tree.SessionInfo,
    ),
    Operation(
        method="GET",
        path="/v1/sessions/{sid}/events",
        endpoint=session_events,
        operation_id="streamSessionEvents",
        summary="The session's typed events as Server-Sent Events, resumable by Last-Event-ID",
        tag="sessions",
        query=EventsQuery,
        event_stream=True,
        errors=(503,),
        headers=(("Last-Event-ID", "the id of the last event seen (wins over ?after=)"),),
    ),
)
