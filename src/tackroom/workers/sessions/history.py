"""Reading history: a session's own entries, and the history it shares with its sources.

Each session read is one ``list_state`` of its entries (plus the metadata's ``pending`` batch for
the session itself), and each session on a path is listed at most once per request.
"""

from __future__ import annotations

from tackroom.contracts.sessions import BROKEN_HISTORY_ERROR, SessionEntry
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import StateBackend
from tackroom.workers.sessions.paths import Address, BrokenHistory, walk
from tackroom.workers.sessions.records import (
    ENTRIES_SCOPE,
    SessionMeta,
    entry_key,
    session_prefix,
)

__all__ = ["History", "Known"]

Known = dict[str, dict[str, SessionEntry]]
"""The entries read so far in one request: session id → entry id → entry."""


class History:
    def __init__(self, backend: StateBackend) -> None:
        self._backend = backend

    async def find_own(self, meta: SessionMeta, entry_id: str) -> SessionEntry | None:
        for entry in meta.pending:
            if entry.entry_id == entry_id:
                return entry
        stored = await self._backend.get_state(ENTRIES_SCOPE, entry_key(meta.session_id, entry_id))
        return None if stored is None else SessionEntry.model_validate(stored.value)

    async def locate(
        self, meta: SessionMeta, entry_id: str, *, known: Known
    ) -> SessionEntry | None:
        """The entry ``entry_id`` visible in the session: its own first, then shared history."""
        own = known.get(meta.session_id)
        found = own.get(entry_id) if own is not None else await self.find_own(meta, entry_id)
        if found is not None:
            return found
        return next(
            (e for e in await self.shared_path(meta, known) if e.entry_id == entry_id), None
        )

    async def shared_path(self, meta: SessionMeta, known: Known) -> list[SessionEntry]:
        """The history a fork or clone shares, from its fork point to the root (leaf first)."""
        origin = meta.origin
        if origin is None or origin.from_entry_id is None or origin.base_session_id is None:
            return []
        return await self.path((origin.base_session_id, origin.from_entry_id), known)

    async def path(self, start: Address | None, known: Known) -> list[SessionEntry]:
        """The path from ``start`` to the root (leaf first), listing each session at most once."""
        path: list[SessionEntry] = []
        seen: set[Address] = set()
        current = start
        while True:
            try:
                current = walk(current, known, path, seen)
            except BrokenHistory as exc:
                raise FunctionError(BROKEN_HISTORY_ERROR, str(exc)) from None
            if current is None:
                return path
            known[current[0]] = await self._stored_entries(current[0])

    async def own_entries(self, meta: SessionMeta) -> dict[str, SessionEntry]:
        entries = await self._stored_entries(meta.session_id)
        for entry in meta.pending:
            entries.setdefault(entry.entry_id, entry)
        return entries

    async def _stored_entries(self, session_id: str) -> dict[str, SessionEntry]:
        stored = await self._backend.list_state(ENTRIES_SCOPE, prefix=session_prefix(session_id))
        entries = (SessionEntry.model_validate(item.value) for item in stored)
        return {entry.entry_id: entry for entry in entries}
