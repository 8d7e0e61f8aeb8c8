"""Deleting a session: its metadata, its list entry, its own entries and its inboxes.

Refused (``session_shared``) while another session's history reaches into it — a fork or clone
whose shared history it holds, or whose leaf it holds — since deleting it would break theirs.
The metadata goes first, by compare-and-set: from then on the session is gone for every reader
(an append racing the delete fails with ``session_not_found``), and a delete that dies half-way
leaves only values nothing reaches, which a repeated delete sweeps up.
"""

from __future__ import annotations

from tackroom.contracts.sessions import (
    CONTENTION_ERROR,
    SESSION_NOT_FOUND_ERROR,
    SESSION_SHARED_ERROR,
    DeleteResponse,
)
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.workers.sessions.listing import SessionIndex
from tackroom.workers.sessions.records import (
    ENTRIES_SCOPE,
    INBOX_SCOPE,
    SESSIONS_SCOPE,
    SessionMeta,
    StateBackend,
    session_prefix,
)

__all__ = ["delete_session"]

_NAMED = 3


async def delete_session(
    backend: StateBackend, index: SessionIndex, session_id: str
) -> DeleteResponse:
    stored = await backend.get_state(SESSIONS_SCOPE, session_id)
    if stored is not None:
        meta = SessionMeta.model_validate(stored.value)
        sharers = await _sharers(backend, session_id)
        if sharers:
            named = ", ".join(repr(s) for s in sharers[:_NAMED])
            more = f" and {len(sharers) - _NAMED} more" if len(sharers) > _NAMED else ""
            raise FunctionError(
                SESSION_SHARED_ERROR,
                f"session {session_id!r} holds history that {named}{more} share: delete those"
                " first",
            )
        try:
            await backend.delete_state(
                SESSIONS_SCOPE, session_id, expected_revision=stored.revision
            )
        except RevisionConflict:
            raise FunctionError(
                CONTENTION_ERROR,
                f"session {session_id!r} changed while being deleted; nothing was deleted, try"
                " again",
            ) from None
        await index.remove(meta.index_key)
    entries = await _delete_prefix(backend, ENTRIES_SCOPE, session_prefix(session_id))
    inboxes = await _delete_prefix(backend, INBOX_SCOPE, session_prefix(session_id))
    if stored is None and not (entries or inboxes):
        raise FunctionError(SESSION_NOT_FOUND_ERROR, f"no session {session_id!r}")
    return DeleteResponse(session_id=session_id, entries=entries, inboxes=inboxes)


async def _sharers(backend: StateBackend, session_id: str) -> list[str]:
    """Other sessions whose history or leaf lies in ``session_id`` (a chain of forks reaches
    its root through each link's base, so the direct ones are enough)."""
    found: list[str] = []
    for item in await backend.list_state(SESSIONS_SCOPE):
        if item.key == session_id:
            continue
        other = SessionMeta.model_validate(item.value)
        base = other.origin.base_session_id if other.origin is not None else None
        if session_id in (base, other.leaf_session_id):
            found.append(other.session_id)
    return sorted(found)


async def _delete_prefix(backend: StateBackend, scope: str, prefix: str) -> int:
    deleted = 0
    for item in await backend.list_state(scope, prefix=prefix):
        if await backend.delete_state(scope, item.key):
            deleted += 1
    return deleted
