"""Session trees on engine state: create, append, read paths, fork and clone without copying.

Every entry is its own state value, written once; a session's metadata is one small value
updated by compare-and-set, which is what makes an append atomic (see :class:`SessionMeta`).
A fork or clone writes only its metadata: its history is the source's, reached by address.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

from tackroom.contracts.context import COMPACTION_TYPE
from tackroom.contracts.messages import AgentMessage, CustomMessage
from tackroom.contracts.principal import Principal
from tackroom.contracts.sessions import (
    CONTENTION_ERROR,
    ENTRY_NOT_FOUND_ERROR,
    SESSION_EXISTS_ERROR,
    SESSION_NOT_FOUND_ERROR,
    AppendResult,
    EntryType,
    MessagesResponse,
    Origin,
    PathMessage,
    SessionEntry,
    SessionInfo,
    TreeResponse,
)
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import StateBackend, Transactions, journal
from tackroom.kit.cas import backoff
from tackroom.workers.sessions.history import History, Known
from tackroom.workers.sessions.listing import SessionIndex
from tackroom.workers.sessions.paths import Address, address_of, build_tree
from tackroom.workers.sessions.records import (
    ENTRIES_SCOPE,
    SESSIONS_SCOPE,
    SessionMeta,
    entry_key,
    index_key,
    preview_of,
    title_from,
)

__all__ = ["NewEntry", "SessionStore"]

_SINCE_LIMIT = 256
"""Entries a ``since_entry_id`` read walks back at most before reading the full path."""
HEADS_KEPT = 512
"""How many sessions' heads appends keep in memory (the most recent)."""

NewEntry = tuple[str | None, AgentMessage]
"""``(entry_id or None, message)``: one entry to append."""


class StoreBackend(StateBackend, Transactions, Protocol):
    """The engine's parts the store uses (an ``Engine`` is one)."""


def _type_of(message: AgentMessage) -> EntryType:
    if not isinstance(message, CustomMessage):
        return "message"
    return "compaction" if message.custom_type == COMPACTION_TYPE else "custom"


class SessionStore:
    def __init__(
        self,
        backend: StoreBackend,
        *,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        max_attempts: int = 64,
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._new_id = new_id
        self._max_attempts = max_attempts
        self.index = SessionIndex(backend)
        self._history = History(backend)
        self._heads: OrderedDict[str, tuple[SessionMeta, int]] = OrderedDict()
        """The head (metadata, revision) each recent append wrote, newest last: the next append
        to the session starts from it instead of reading and validating it again. Only an
        append uses it, and only for a compare-and-set: a head another writer (or process)
        replaced, or one whose unit of work never committed (its revision was never stored),
        loses that compare-and-set and is read afresh."""

    @property
    def backend(self) -> StoreBackend:
        return self._backend

    # -- sessions ------------------------------------------------------------------------------
    async def load(self, session_id: str) -> tuple[SessionMeta, int]:
        """The session's metadata and its revision; ``session_not_found`` if there is none."""
        stored = await self._backend.get_state(SESSIONS_SCOPE, session_id)
        if stored is None:
            raise FunctionError(SESSION_NOT_FOUND_ERROR, f"no session {session_id!r}")
        return SessionMeta.model_validate(stored.value), stored.revision

    def forget_head(self, session_id: str) -> None:
        """Drop the head an append kept (the session was deleted, or the head was stale)."""
        self._heads.pop(session_id, None)

    def _keep_head(self, meta: SessionMeta, revision: int) -> None:
        self._heads[meta.session_id] = (meta, revision)
        self._heads.move_to_end(meta.session_id)
        if len(self._heads) > HEADS_KEPT:
            self._heads.popitem(last=False)

    async def get(self, session_id: str) -> SessionInfo:
        meta, _ = await self.load(session_id)
        return meta.info()

    async def create(
        self,
        *,
        session_id: str | None = None,
        display_name: str | None = None,
        cwd: str | None = None,
        origin: Origin | None = None,
        leaf: Address | None = None,
        pinned: Sequence[str] = (),
    ) -> SessionInfo:
        """A new session; ``session_exists`` if ``session_id`` is taken.

        The list index and the metadata are one unit of work, the index written first: where
        the unit is not atomic and the process dies before the metadata, the index holds a key
        no session claims, which the listing skips; a session is never unlisted. A unit that
        loses the id removes its index key (none is left where the unit is atomic).
        """
        now = self._clock()
        session_id = session_id or self._new_id()
        meta = SessionMeta(
            session_id=session_id,
            created_at=now,
            updated_at=now,
            display_name=display_name,
            cwd=cwd,
            origin=origin,
            leaf_id=None if leaf is None else leaf[1],
            leaf_session_id=None if leaf is None else leaf[0],
            index_key=index_key(session_id, now),
            pinned=list(pinned),
        )
        try:
            async with self._backend.transaction():
                await self.index.add(meta)
                head = await self._backend.set_state(
                    SESSIONS_SCOPE, session_id, meta, expected_revision=0
                )
        except RevisionConflict:
            winner = await self._backend.get_state(SESSIONS_SCOPE, session_id)
            if winner is None or winner.value.get("index_key") != meta.index_key:
                await self.index.remove(meta.index_key)  # (a twin in the same µs keeps it)
            raise FunctionError(
                SESSION_EXISTS_ERROR, f"session {session_id!r} already exists"
            ) from None
        self._keep_head(meta, head.revision)
        return meta.info()

    async def ensure(
        self, session_id: str, *, display_name: str | None = None, cwd: str | None = None
    ) -> tuple[SessionInfo, bool]:
        """The session, created if absent; ``True`` when this call created it."""
        stored = await self._backend.get_state(SESSIONS_SCOPE, session_id)
        if stored is not None:
            return SessionMeta.model_validate(stored.value).info(), False
        try:
            info = await self.create(session_id=session_id, display_name=display_name, cwd=cwd)
            return info, True
        except FunctionError as exc:
            if exc.code != SESSION_EXISTS_ERROR:
                raise
        return await self.get(session_id), False

    async def fork(
        self,
        source_session_id: str,
        from_entry_id: str,
        *,
        session_id: str | None = None,
        display_name: str | None = None,
        cwd: str | None = None,
    ) -> SessionInfo:
        """A session whose history is the source's path to ``from_entry_id``; writes no entry."""
        source, _ = await self.load(source_session_id)
        point = await self._history.locate(source, from_entry_id, known={})
        if point is None:
            raise _entry_not_found(source_session_id, from_entry_id, "from_entry_id")
        await self._materialize(source.pending)
        origin = Origin(
            kind="fork",
            source_session_id=source_session_id,
            from_entry_id=from_entry_id,
            base_session_id=point.session_id,
        )
        return await self.create(
            session_id=session_id,
            display_name=display_name,
            cwd=cwd if cwd is not None else source.cwd,
            origin=origin,
            leaf=address_of(point),
            pinned=source.pinned,  # those off the fork's path are never on it: harmless
        )

    async def clone(
        self,
        source_session_id: str,
        *,
        session_id: str | None = None,
        display_name: str | None = None,
        cwd: str | None = None,
    ) -> SessionInfo:
        """A session whose history is the source's whole active path; writes no entry."""
        source, _ = await self.load(source_session_id)
        await self._materialize(source.pending)
        origin = Origin(
            kind="clone",
            source_session_id=source_session_id,
            from_entry_id=source.leaf_id,
            base_session_id=source.leaf_session_id,
        )
        leaf = None
        if source.leaf_id is not None and source.leaf_session_id is not None:
            leaf = (source.leaf_session_id, source.leaf_id)
        return await self.create(
            session_id=session_id,
            display_name=display_name,
            cwd=cwd if cwd is not None else source.cwd,
            origin=origin,
            leaf=leaf,
            pinned=source.pinned,
        )

    # -- entries -------------------------------------------------------------------------------
    async def append(
        self,
        session_id: str,
        items: Sequence[NewEntry],
        *,
        parent_id: str | None = None,
        entry_type: EntryType | None = None,
        principal: Principal | None = None,
    ) -> list[AppendResult]:
        """Append ``items`` as a chain under ``parent_id`` (default: the active leaf).

        An item whose id is already stored is returned as it is (``created=False``) and the chain
        continues from it; the new entries commit together in one compare-and-set of the
        metadata, and the last new one becomes the active leaf.
        """
        attempt, use_kept = 0, True
        while attempt < self._max_attempts:
            kept = self._heads.get(session_id) if use_kept else None
            meta, revision = kept if kept is not None else await self.load(session_id)
            parent = await self._resolve_parent(meta, parent_id)
            now = self._clock()
            seq = meta.next_seq
            results: list[AppendResult] = []
            fresh: list[SessionEntry] = []
            for entry_id, message in items:
                existing = None
                if entry_id is not None:
                    existing = next((e for e in fresh if e.entry_id == entry_id), None)
                    existing = existing or await self._history.find_own(meta, entry_id)
                if existing is None:
                    entry = SessionEntry(
                        entry_id=entry_id or self._new_id(),
                        session_id=session_id,
                        parent_id=None if parent is None else parent[1],
                        parent_session_id=(
                            parent[0] if parent is not None and parent[0] != session_id else None
                        ),
                        seq=seq,
                        type=entry_type or _type_of(message),
                        message=message,
                        timestamp=now,
                        principal=principal,
                    )
                    seq += 1
                    fresh.append(entry)
                    results.append(AppendResult(entry=entry, created=True))
                else:
                    entry = existing
                    results.append(AppendResult(entry=entry, created=False))
                parent = address_of(entry)
            if not fresh:
                return results
            # The previous batch leaves ``pending`` now: make sure it is stored first.
            await self._materialize(meta.pending)
            # The new entries wait in ``pending`` only where the unit of work below is not
            # atomic; where it is, they commit with the metadata and are stored once, each in
            # its entry.
            pending = journal(self._backend, fresh)
            updated = meta.model_copy(
                update={
                    "updated_at": now,
                    "entry_count": meta.entry_count + len(fresh),
                    "next_seq": seq,
                    "leaf_id": fresh[-1].entry_id,
                    "leaf_session_id": session_id,
                    "pending": pending,
                    "preview": None if pending else preview_of(fresh[-1]),
                    "title": meta.title or title_from(fresh),
                }
            )
            try:
                async with self._backend.transaction():
                    head = await self._backend.set_state(
                        SESSIONS_SCOPE, session_id, updated, expected_revision=revision
                    )
                    await self._materialize(fresh)
            except RevisionConflict:
                self.forget_head(session_id)
                if kept is not None:  # the kept head was stale: read it now, no pause
                    use_kept = False
                    continue
                await backoff(attempt)
                attempt += 1
                continue
            self._keep_head(updated, head.revision)
            return results
        raise FunctionError(
            CONTENTION_ERROR,
            f"session {session_id!r}: append lost {self._max_attempts} compare-and-sets in a row",
        )

    async def messages(
        self, session_id: str, *, leaf_id: str | None = None, since_entry_id: str | None = None
    ) -> MessagesResponse:
        meta, _ = await self.load(session_id)
        if since_entry_id is not None and leaf_id is None:
            recent = await self._since(meta, since_entry_id)
            if recent is not None:
                return MessagesResponse(
                    session_id=session_id,
                    leaf_id=meta.leaf_id,
                    messages=[
                        PathMessage.model_construct(
                            entry_id=e.entry_id, type=e.type, message=e.message
                        )
                        for e in recent
                    ],
                    partial=True,
                    pinned=meta.pinned,
                )
        own = await self._history.own_entries(meta)
        known: Known = {session_id: own}
        start: Address | None = None
        if leaf_id is not None:
            leaf = await self._history.locate(meta, leaf_id, known=known)
            if leaf is None:
                raise _entry_not_found(session_id, leaf_id, "leaf_id")
            start = address_of(leaf)
        elif meta.leaf_id is not None:
            start = (meta.leaf_session_id or session_id, meta.leaf_id)
        path = await self._history.path(start, known)
        path.reverse()
        return MessagesResponse(
            session_id=session_id,
            leaf_id=None if start is None else start[1],
            messages=[  # built from validated entries: no need to validate again
                PathMessage.model_construct(entry_id=e.entry_id, type=e.type, message=e.message)
                for e in path
            ],
            pinned=meta.pinned,
        )

    async def _since(self, meta: SessionMeta, since_entry_id: str) -> list[SessionEntry] | None:
        """The own entries after ``since_entry_id`` on the active path, oldest first.

        Walks back from the leaf one entry read at a time, so a reader that keeps its place
        pays for what is new, not for the whole history. ``None`` when the walk does not meet
        ``since_entry_id`` within :data:`_SINCE_LIMIT` steps inside this session (another
        branch became active, the cursor is in shared history): the caller reads the full path.
        """
        if meta.leaf_session_id not in (None, meta.session_id):
            return None
        recent: list[SessionEntry] = []
        current = meta.leaf_id
        while current is not None and len(recent) <= _SINCE_LIMIT:
            if current == since_entry_id:
                recent.reverse()
                return recent
            entry = await self._history.find_own(meta, current)
            if entry is None or entry.parent_session_id not in (None, meta.session_id):
                return None
            recent.append(entry)
            current = entry.parent_id
        return None

    async def tree(self, session_id: str) -> TreeResponse:
        meta, _ = await self.load(session_id)
        own = await self._history.own_entries(meta)
        shared = await self._history.shared_path(meta, {session_id: own})
        return TreeResponse(
            session_id=session_id,
            leaf_id=meta.leaf_id,
            leaf_session_id=meta.leaf_session_id,
            roots=build_tree([*reversed(shared), *own.values()], session_id=session_id),
        )

    async def locate(self, meta: SessionMeta, entry_id: str) -> SessionEntry | None:
        """The entry ``entry_id`` of the session's visible history (its own or shared)."""
        return await self._history.locate(meta, entry_id, known={})

    # -- internals -----------------------------------------------------------------------------
    async def _resolve_parent(self, meta: SessionMeta, parent_id: str | None) -> Address | None:
        if parent_id is None:
            if meta.leaf_id is None:
                return None
            return (meta.leaf_session_id or meta.session_id, meta.leaf_id)
        found = await self._history.locate(meta, parent_id, known={})
        if found is None:
            raise _entry_not_found(meta.session_id, parent_id, "parent_id")
        return address_of(found)

    async def _materialize(self, entries: Sequence[SessionEntry]) -> None:
        for entry in entries:
            # A conflict means it is stored already (by its writer, or by an append helping).
            with contextlib.suppress(RevisionConflict):
                await self._backend.set_state(
                    ENTRIES_SCOPE,
                    entry_key(entry.session_id, entry.entry_id),
                    entry,
                    expected_revision=0,
                )


def _entry_not_found(session_id: str, entry_id: str, role: str) -> FunctionError:
    return FunctionError(
        ENTRY_NOT_FOUND_ERROR,
        f"{role} {entry_id!r} is not in the history of session {session_id!r}",
    )
