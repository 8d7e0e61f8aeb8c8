"""Per-session inboxes (``steering``, ``followup``, any name): push, peek, atomic drain.

One state value per inbox, ``{schema_version, items}``. A push is one atomic ``append`` update;
a drain reads the value and deletes it only at the revision it read, so a push that lands in
between makes the delete fail and the drain read again: no item is lost or handed out twice.
"""

from __future__ import annotations

from typing import Any

from tackroom.contracts.messages import AgentMessage, messages_adapter
from tackroom.contracts.sessions import CONTENTION_ERROR, SCHEMA_VERSION
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import StateBackend
from tackroom.kit.cas import backoff
from tackroom.workers.sessions.records import INBOX_SCOPE, entry_key

__all__ = ["Inbox"]


def _items(value: Any) -> list[AgentMessage]:
    if not isinstance(value, dict):
        return []
    return messages_adapter.validate_python(value.get("items", []))


class Inbox:
    def __init__(self, backend: StateBackend, *, max_attempts: int = 64) -> None:
        self._backend = backend
        self._max_attempts = max_attempts

    async def push(self, session_id: str, name: str, item: AgentMessage) -> int:
        """Queue ``item``; returns how many items wait in the inbox now."""
        stored = await self._backend.update_state(
            INBOX_SCOPE,
            entry_key(session_id, name),
            [
                {"op": "set", "path": ["schema_version"], "value": SCHEMA_VERSION},
                {"op": "append", "path": ["items"], "value": item.model_dump(mode="json")},
            ],
        )
        return len(stored.value["items"])

    async def peek(self, session_id: str, name: str) -> list[AgentMessage]:
        stored = await self._backend.get_state(INBOX_SCOPE, entry_key(session_id, name))
        return [] if stored is None else _items(stored.value)

    async def drain(self, session_id: str, name: str) -> list[AgentMessage]:
        """Every waiting item, oldest first, and an empty inbox, in one step."""
        key = entry_key(session_id, name)
        for attempt in range(self._max_attempts):
            stored = await self._backend.get_state(INBOX_SCOPE, key)
            if stored is None:
                return []
            items = _items(stored.value)
            try:
                await self._backend.delete_state(
                    INBOX_SCOPE, key, expected_revision=stored.revision
                )
            except RevisionConflict:
                await backoff(attempt)
                continue
            return items
        raise FunctionError(
            CONTENTION_ERROR, f"inbox {key!r}: drain lost {self._max_attempts} races in a row"
        )

    async def remove(self, session_id: str, name: str, items: list[AgentMessage]) -> int:
        """Remove ``items`` from the head of the inbox if they are still there; returns how many.

        For a consumer that peeks, commits what it read, then removes it: repeating the removal
        after a crash removes nothing more, and items pushed meanwhile stay.
        """
        key = entry_key(session_id, name)
        wanted = [item.model_dump(mode="json") for item in items]
        for attempt in range(self._max_attempts):
            stored = await self._backend.get_state(INBOX_SCOPE, key)
            if stored is None or not wanted:
                return 0
            waiting = [item.model_dump(mode="json") for item in _items(stored.value)]
            if waiting[: len(wanted)] != wanted:
                return 0
            rest = waiting[len(wanted) :]
            try:
                if rest:
                    await self._backend.set_state(
                        INBOX_SCOPE,
                        key,
                        {"schema_version": SCHEMA_VERSION, "items": rest},
                        expected_revision=stored.revision,
                    )
                else:
                    await self._backend.delete_state(
                        INBOX_SCOPE, key, expected_revision=stored.revision
                    )
            except RevisionConflict:
                await backoff(attempt)
                continue
            return len(wanted)
        raise FunctionError(
            CONTENTION_ERROR, f"inbox {key!r}: remove lost {self._max_attempts} races in a row"
        )
