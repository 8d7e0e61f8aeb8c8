"""Changing a session's metadata in place (its pins, its title): read it, change it, write it
back by compare-and-set — so a change and an append racing each other both land — and read it
afresh when another write came first."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tackroom.contracts.sessions import CONTENTION_ERROR
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.workers.sessions.records import SESSIONS_SCOPE, SessionMeta
from tackroom.workers.sessions.retry import backoff
from tackroom.workers.sessions.store import SessionStore

__all__ = ["change_meta"]

Change = Callable[[SessionMeta], Awaitable[SessionMeta | None]]
"""The metadata changed (``None``: nothing to change, nothing is written)."""


async def change_meta(
    store: SessionStore, session_id: str, change: Change, *, max_attempts: int, what: str
) -> SessionMeta:
    """The session's metadata once ``change`` is written (or as it is, when it changes nothing);
    ``contention`` after ``max_attempts`` lost compare-and-sets (``what`` names the change)."""
    for attempt in range(max_attempts):
        meta, revision = await store.load(session_id)
        updated = await change(meta)
        if updated is None:
            return meta
        try:
            await store.backend.set_state(
                SESSIONS_SCOPE,
                session_id,
                updated.model_dump(mode="json"),
                expected_revision=revision,
            )
        except RevisionConflict:
            await backoff(attempt)
            continue
        return updated
    raise FunctionError(
        CONTENTION_ERROR,
        f"session {session_id!r}: {what} lost {max_attempts} compare-and-sets in a row",
    )
