"""The orchestrator's calls to the sessions worker, through the sessions contract's descriptors."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from tackroom.contracts.messages import AgentMessage
from tackroom.contracts.sessions import (
    APPEND_BATCH,
    ENSURE,
    INBOX_PEEK,
    INBOX_PUSH,
    INBOX_REMOVE,
    MESSAGES,
    AppendBatchRequest,
    BatchItem,
    EnsureRequest,
    InboxPushRequest,
    InboxRemoveRequest,
    InboxRequest,
    MessagesRequest,
)
from tackroom.engine.protocol import Engine

__all__ = ["SessionsClient"]


class SessionsClient:
    """Typed calls to the sessions worker; keeps the validated history of recently active
    sessions.

    A model call needs the whole transcript; reading and validating it every time made a turn
    cost grow with the session. The cache keeps each session's messages with the entry id they
    end at and asks the sessions worker only for what came after (``since_entry_id``); when the
    worker cannot answer that way (another branch became active), it reads the whole path.
    """

    def __init__(self, engine: Engine, *, timeout: float = 30.0, cache_size: int = 1024) -> None:
        self._engine = engine
        self._timeout = timeout
        self._cache_size = cache_size
        self._history: OrderedDict[str, tuple[str, list[tuple[str, AgentMessage]]]] = OrderedDict()

    async def ensure(self, session_id: str) -> None:
        await ENSURE.send(self._engine, EnsureRequest(session_id=session_id), timeout=self._timeout)

    async def append(self, session_id: str, entries: list[tuple[str, AgentMessage]]) -> None:
        """Append in order; each entry id is idempotent, so a re-run step duplicates nothing."""
        if not entries:
            return
        request = AppendBatchRequest(
            session_id=session_id,
            entries=[
                BatchItem(entry_id=entry_id, message=message) for entry_id, message in entries
            ],
        )
        # The reply repeats the stored entries; nobody reads it, so none of it is validated.
        await APPEND_BATCH.send(self._engine, request, timeout=self._timeout)

    async def messages(self, session_id: str) -> list[AgentMessage]:
        """The active path, oldest first."""
        return [message for _, message in await self.path(session_id)]

    async def path(self, session_id: str) -> list[tuple[str, AgentMessage]]:
        """The active path as (entry id, message), oldest first."""
        cached = self._history.get(session_id)
        request = MessagesRequest(
            session_id=session_id, since_entry_id=None if cached is None else cached[0]
        )
        reply = await MESSAGES.call(self._engine, request, timeout=self._timeout)
        fresh = [(item.entry_id, item.message) for item in reply.messages]
        path = [*cached[1], *fresh] if cached is not None and reply.partial else fresh
        if reply.leaf_id is None:
            self._history.pop(session_id, None)
        else:
            self._history[session_id] = (reply.leaf_id, path)
            self._history.move_to_end(session_id)
            while len(self._history) > self._cache_size:
                self._history.popitem(last=False)
        return list(path)

    async def peek(self, session_id: str, name: str) -> list[AgentMessage]:
        request = InboxRequest(session_id=session_id, name=name)
        return (await INBOX_PEEK.call(self._engine, request, timeout=self._timeout)).items

    async def remove(self, session_id: str, name: str, items: list[Any]) -> None:
        """Remove what a peek returned (``items`` as JSON), if still at the head: repeating it
        removes nothing."""
        request = InboxRemoveRequest(session_id=session_id, name=name, items=items)
        await INBOX_REMOVE.send(self._engine, request, timeout=self._timeout)

    async def push(self, session_id: str, name: str, item: AgentMessage) -> None:
        request = InboxPushRequest(session_id=session_id, name=name, item=item)
        await INBOX_PUSH.send(self._engine, request, timeout=self._timeout)
