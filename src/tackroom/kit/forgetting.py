"""Forget a deleted session's data: one call wires a worker's handler to ``session-tree::deleted``.

The handler is served as ``<worker>::forget_session`` and a stream trigger on
:data:`~tackroom.contracts.forgetting.SESSION_DELETED` calls it for every deletion. The engine
enqueues a trigger's call in the same write as the record (embedded: one SQLite transaction; NATS:
a durable relay consumer), and a handler that fails is retried by the trigger queue, so a
deletion reaches every owner that was registered, even across a crash.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tackroom.contracts.forgetting import (
    SESSION_DELETED,
    Forgotten,
    SessionDeletedTrigger,
    forgetter,
)
from tackroom.runtime.worker import WorkerContext

__all__ = ["Forget", "delete_keys", "forget_deleted_sessions"]

Forget = Callable[[str], Awaitable[dict[str, int]]]
"""Delete what the worker keeps of one session; returns counts by kind (0s when already gone)."""


async def forget_deleted_sessions(ctx: WorkerContext[Any], forget: Forget) -> None:
    function = forgetter(ctx.name)

    async def handle(trigger: SessionDeletedTrigger) -> Forgotten:
        session_id = trigger.data.session_id
        return Forgotten(session_id=session_id, deleted=await forget(session_id))

    await ctx.serve(function, handle)
    await ctx.add_stream_trigger(SESSION_DELETED.name, function.id)


async def delete_keys(ctx: WorkerContext[Any], scope: str, *, prefix: str) -> int:
    """Delete every key of ``scope`` starting with ``prefix``; returns how many went."""
    deleted = 0
    for entry in await ctx.engine.list_state(scope, prefix=prefix):
        if await ctx.engine.delete_state(scope, entry.key):
            deleted += 1
    return deleted
