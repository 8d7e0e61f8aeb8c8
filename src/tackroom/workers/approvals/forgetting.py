"""What the approvals worker forgets of a deleted session: pending calls, decisions, their history
and the session's approval settings (keys ``<session>/...`` and ``<session>``)."""

from __future__ import annotations

from typing import Any

from tackroom.contracts import approvals as c
from tackroom.kit.forgetting import delete_keys
from tackroom.runtime.worker import WorkerContext

__all__ = ["forget_session"]


async def forget_session(ctx: WorkerContext[Any], session_id: str) -> dict[str, int]:
    own = f"{session_id}/"  # session ids hold no "/", so the prefix is this session's alone
    deleted = {
        scope.name: await delete_keys(ctx, scope.name, prefix=own)
        for scope in (c.PENDING_SCOPE, c.DECISIONS_SCOPE, c.HISTORY_SCOPE)
    }
    deleted[c.SETTINGS_SCOPE.name] = int(
        await ctx.engine.delete_state(c.SETTINGS_SCOPE.name, session_id)
    )
    return deleted
