"""Deleting a session: its metadata, its list entry, its own entries and its inboxes.

Refused (``session_shared``) while another session's history reaches into it — a fork or clone
whose shared history it holds, or whose leaf it holds — since deleting it would break theirs;
a cascading delete removes those first (:func:`dependants`, deepest first).
The metadata goes first, by compare-and-set: from then on the session is gone for every reader
(an append racing the delete fails with ``session_not_found``), and a delete that dies half-way
leaves only values nothing reaches, which a repeated delete sweeps up.
"""

from __future__ import annotations

import time
import uuid

from tackroom.contracts.audit import AuditFact
from tackroom.contracts.forgetting import SESSION_DELETED, SessionDeleted
from tackroom.contracts.sessions import (
    CONTENTION_ERROR,
    SESSION_NOT_FOUND_ERROR,
    SESSION_SHARED_ERROR,
    DeleteRequest,
    DeleteResponse,
)
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import Engine, StateBackend
from tackroom.kit.audit import record_fact
from tackroom.workers.sessions.listing import SessionIndex
from tackroom.workers.sessions.records import (
    ENTRIES_SCOPE,
    INBOX_SCOPE,
    SESSIONS_SCOPE,
    SessionMeta,
    session_prefix,
)
from tackroom.workers.sessions.store import SessionStore

__all__ = ["Deletions", "delete_session", "dependants"]

_NAMED = 3


class Deletions:
    """``session-tree::delete``: each session deleted is recorded in the audit log and announced
    on ``session-tree::deleted`` (so every worker forgets what it derived from it); with
    ``cascade``, its forks and clones first, each the same way."""

    def __init__(self, engine: Engine, store: SessionStore) -> None:
        self._engine = engine
        self._store = store

    async def delete(self, request: DeleteRequest) -> DeleteResponse:
        cascaded: list[str] = []
        if request.cascade:
            for session_id in await dependants(self._store.backend, request.session_id):
                try:
                    await self._delete_one(session_id, request.requested_by)
                except FunctionError as exc:
                    if exc.code != SESSION_NOT_FOUND_ERROR:
                        raise
                    continue  # deleted meanwhile
                cascaded.append(session_id)
        deleted = await self._delete_one(request.session_id, request.requested_by)
        return deleted.model_copy(update={"cascaded": cascaded})

    async def _delete_one(self, session_id: str, requested_by: str | None) -> DeleteResponse:
        store = self._store
        deleted = await delete_session(store.backend, store.index, session_id)
        store.forget_head(session_id)
        await record_fact(self._engine, _deletion_fact(deleted, requested_by))
        notice = SessionDeleted(session_id=session_id, requested_by=requested_by, at=time.time())
        await SESSION_DELETED.append(self._engine, session_id, notice)
        return deleted


def _deletion_fact(deleted: DeleteResponse, requested_by: str | None) -> AuditFact:
    """The audit fact of a deletion (the one trace of the session that stays)."""
    return AuditFact(
        fact_id=f"session_deleted:{deleted.session_id}:{uuid.uuid4().hex}",
        kind="session_deleted",
        actor=requested_by,
        session_id=deleted.session_id,
        at=time.time(),
        fact={"entries": deleted.entries, "inboxes": deleted.inboxes},
    )


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
                f"session {session_id!r} holds history that {named}{more} share: delete them"
                " with it by passing cascade (`--cascade`; `?cascade=true` over HTTP)",
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


async def dependants(backend: StateBackend, session_id: str) -> list[str]:
    """Every session forked or cloned from ``session_id``, or sharing its history, and theirs in
    turn: the ones a cascading delete removes first, each before the session it came from."""
    children: dict[str, list[str]] = {}
    for item in await backend.list_state(SESSIONS_SCOPE):
        meta = SessionMeta.model_validate(item.value)
        origin = meta.origin
        sources = {meta.leaf_session_id}
        if origin is not None:
            sources |= {origin.source_session_id, origin.base_session_id}
        for source in sources - {None, meta.session_id}:
            assert source is not None
            children.setdefault(source, []).append(meta.session_id)
    order: list[str] = []
    seen = {session_id}

    def visit(parent: str) -> None:
        for child in sorted(children.get(parent, ())):
            if child not in seen:
                seen.add(child)
                visit(child)
                order.append(child)

    visit(session_id)
    return order


async def _delete_prefix(backend: StateBackend, scope: str, prefix: str) -> int:
    deleted = 0
    for item in await backend.list_state(scope, prefix=prefix):
        if await backend.delete_state(scope, item.key):
            deleted += 1
    return deleted
