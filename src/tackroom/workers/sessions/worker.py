"""The ``sessions`` worker: branching session trees (``session-tree::*``) and per-session inboxes
(``session-inbox::*``) on engine state. Payloads and error codes are in ``contracts``."""

from __future__ import annotations

from tackroom.contracts import sessions as c
from tackroom.kit.cas import CasConfig
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.sessions.inbox import Inbox
from tackroom.workers.sessions.pins import Pins
from tackroom.workers.sessions.removal import Deletions
from tackroom.workers.sessions.store import SessionStore
from tackroom.workers.sessions.titles import Titles

__all__ = ["WORKER", "SessionsConfig"]


class SessionsConfig(CasConfig):
    """``max_attempts`` at each session and inbox write."""


async def _start(ctx: WorkerContext[SessionsConfig]) -> None:
    store = SessionStore(ctx.engine, max_attempts=ctx.config.max_attempts)
    inbox = Inbox(ctx.engine, max_attempts=ctx.config.max_attempts)
    pins = Pins(store, max_attempts=ctx.config.max_attempts)
    titles = Titles(store, max_attempts=ctx.config.max_attempts)
    deletions = Deletions(ctx.engine, store)

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
            principal=request.principal,
        )
        return result

    async def append_batch(request: c.AppendBatchRequest) -> c.AppendBatchResponse:
        results = await store.append(
            request.session_id,
            [(item.entry_id, item.message) for item in request.entries],
            parent_id=request.parent_id,
            principal=request.principal,
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

    await ctx.serve(c.CREATE, create)
    await ctx.serve(c.ENSURE, ensure)
    await ctx.serve(c.GET, get)
    await ctx.serve(c.APPEND, append)
    await ctx.serve(c.APPEND_BATCH, append_batch)
    await ctx.serve(c.MESSAGES, messages)
    await ctx.serve(c.FORK, fork)
    await ctx.serve(c.CLONE, clone)
    await ctx.serve(c.TREE, tree)
    await ctx.serve(c.LIST, list_sessions)
    await ctx.serve(c.DELETE, deletions.delete)
    await ctx.serve(c.PIN, pins.pin)
    await ctx.serve(c.UNPIN, pins.unpin)
    await ctx.serve(c.SET_TITLE, titles.set_title)
    await ctx.serve(c.INBOX_PUSH, push)
    await ctx.serve(c.INBOX_PEEK, peek)
    await ctx.serve(c.INBOX_DRAIN, drain)
    await ctx.serve(c.INBOX_REMOVE, remove)


WORKER = WorkerSpec(
    name="sessions",
    description="Branching session trees with shared-history forks, and per-session inboxes.",
    config_model=SessionsConfig,
    start=_start,
)
