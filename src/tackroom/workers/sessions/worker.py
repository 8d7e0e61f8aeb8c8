"""The ``sessions`` worker: branching session trees (``session-tree::*``) and per-session inboxes
(``session-inbox::*``) on engine state. Payloads and error codes are in ``contracts``."""

from __future__ import annotations

from pydantic import Field

from tackroom.contracts import sessions as c
from tackroom.runtime.worker import TypedFunction, WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.sessions.inbox import Inbox
from tackroom.workers.sessions.store import SessionStore

__all__ = ["WORKER", "SessionsConfig"]


class SessionsConfig(WorkerConfig):
    max_attempts: int = Field(
        default=64, ge=1, description="compare-and-set attempts before failing with 'contention'"
    )


async def _start(ctx: WorkerContext[SessionsConfig]) -> None:
    store = SessionStore(ctx.engine, max_attempts=ctx.config.max_attempts)
    inbox = Inbox(ctx.engine, max_attempts=ctx.config.max_attempts)

    async def create(request: c.CreateRequest) -> c.SessionInfo:
        return await store.create(
            session_id=request.session_id, display_name=request.display_name, cwd=request.cwd
        )

    async def ensure(request: c.EnsureRequest) -> c.EnsureResponse:
        info, created = await store.ensure(
            request.session_id, display_name=request.display_name, cwd=request.cwd
        )
        return c.EnsureResponse(session=info, created=created)

    async def get(request: c.GetRequest) -> c.SessionInfo:
        return await store.get(request.session_id)

    async def append(request: c.AppendRequest) -> c.AppendResult:
        [result] = await store.append(
            request.session_id,
            [(request.entry_id, request.message)],
            parent_id=request.parent_id,
        )
        return result

    async def append_batch(request: c.AppendBatchRequest) -> c.AppendBatchResponse:
        results = await store.append(
            request.session_id,
            [(item.entry_id, item.message) for item in request.entries],
            parent_id=request.parent_id,
        )
        return c.AppendBatchResponse(results=results)

    async def messages(request: c.MessagesRequest) -> c.MessagesResponse:
        return await store.messages(
            request.session_id, leaf_id=request.leaf_id, since_entry_id=request.since_entry_id
        )

    async def fork(request: c.ForkRequest) -> c.SessionInfo:
        return await store.fork(
            request.source_session_id,
            request.from_entry_id,
            session_id=request.session_id,
            display_name=request.display_name,
            cwd=request.cwd,
        )

    async def clone(request: c.CloneRequest) -> c.SessionInfo:
        return await store.clone(
            request.source_session_id,
            session_id=request.session_id,
            display_name=request.display_name,
            cwd=request.cwd,
        )

    async def tree(request: c.TreeRequest) -> c.TreeResponse:
        return await store.tree(request.session_id)

    async def list_sessions(request: c.ListRequest) -> c.ListResponse:
        metas, cursor = await store.index.page(
            limit=request.limit, cursor=request.cursor, order=request.order
        )
        return c.ListResponse(sessions=[meta.info() for meta in metas], next_cursor=cursor)

    async def push(request: c.InboxPushRequest) -> c.InboxPushResponse:
        await store.load(request.session_id)  # session_not_found for a typo'd id
        count = await inbox.push(request.session_id, request.name, request.item)
        return c.InboxPushResponse(count=count)

    async def peek(request: c.InboxRequest) -> c.InboxItems:
        return c.InboxItems(items=await inbox.peek(request.session_id, request.name))

    async def drain(request: c.InboxRequest) -> c.InboxItems:
        return c.InboxItems(items=await inbox.drain(request.session_id, request.name))

    async def remove(request: c.InboxRemoveRequest) -> c.InboxRemoveResponse:
        removed = await inbox.remove(request.session_id, request.name, request.items)
        return c.InboxRemoveResponse(removed=removed)

    table: list[TypedFunction] = [
        (c.CREATE, create, c.CreateRequest, c.SessionInfo,
         "Create a session (session_exists if the given id is taken)."),
        (c.ENSURE, ensure, c.EnsureRequest, c.EnsureResponse,
         "Get a session by id, creating it if absent."),
        (c.GET, get, c.GetRequest, c.SessionInfo, "A session's metadata."),
        (c.APPEND, append, c.AppendRequest, c.AppendResult,
         "Append a message; idempotent by entry_id; chains to the active leaf unless parent_id."),
        (c.APPEND_BATCH, append_batch, c.AppendBatchRequest, c.AppendBatchResponse,
         "Append messages as one chain, committed together; idempotent per entry_id."),
        (c.MESSAGES, messages, c.MessagesRequest, c.MessagesResponse,
         "The path root to leaf (default the active leaf), shared history included."),
        (c.FORK, fork, c.ForkRequest, c.SessionInfo,
         "A new session sharing the source's history up to from_entry_id (nothing copied)."),
        (c.CLONE, clone, c.CloneRequest, c.SessionInfo,
         "A new session sharing the source's whole active path (nothing copied)."),
        (c.TREE, tree, c.TreeRequest, c.TreeResponse,
         "Every entry of the session and its shared history, nested by branch."),
        (c.LIST, list_sessions, c.ListRequest, c.ListResponse,
         "A page of sessions by creation time, with a cursor for the next page."),
        (c.INBOX_PUSH, push, c.InboxPushRequest, c.InboxPushResponse,
         "Queue a message in a session's inbox (steering, followup, ...)."),
        (c.INBOX_PEEK, peek, c.InboxRequest, c.InboxItems, "The messages waiting in an inbox."),
        (c.INBOX_DRAIN, drain, c.InboxRequest, c.InboxItems,
         "Take every message waiting in an inbox, atomically."),
        (c.INBOX_REMOVE, remove, c.InboxRemoveRequest, c.InboxRemoveResponse,
         "Remove items a peek returned, if still at the head (idempotent)."),
    ]  # fmt: skip
    await ctx.register_typed_functions(table)


WORKER = WorkerSpec(
    name="sessions",
    description="Branching session trees with shared-history forks, and per-session inboxes.",
    config_model=SessionsConfig,
    start=_start,
)
