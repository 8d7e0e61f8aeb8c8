"""The orchestrator's calls to the sessions worker, through the sessions contract's descriptors."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from tackroom.contracts.messages import AgentMessage
from tackroom.contracts.principal import Principal
from tackroom.contracts.sessions import (
    APPEND_BATCH,
    ENSURE,
    INBOX_PEEK,
    INBOX_PUSH,
    INBOX_REMOVE,
    MESSAGES,
    AppendBatchRequest,
    AppendResult,
    BatchItem,
    EnsureRequest,
    InboxPushRequest,
    InboxRemoveRequest,
    InboxRequest,
    MessagesRequest,
)
from tackroom.engine.protocol import Engine

__all__ = ["PathView", "SessionsClient"]

_GENERATIONS = itertools.count(1)


@dataclass(slots=True)
class PathView:
    """A session's active path as last read: grows in place while the path only extends."""

    leaf: str | None = None
    ids: list[str] = field(default_factory=list)
    messages: list[AgentMessage] = field(default_factory=list)
    pinned: tuple[str, ...] = ()
    generation: int = field(default_factory=lambda: next(_GENERATIONS))
    """Unique per view: a path replaced rather than extended (another branch became active) is
    a new view with a new generation."""


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
        self._history: OrderedDict[str, PathView] = OrderedDict()

    async def ensure(self, session_id: str) -> None:
        await ENSURE.send(self._engine, EnsureRequest(session_id=session_id), timeout=self._timeout)

    async def append(
        self,
        session_id: str,
        entries: list[tuple[str, AgentMessage]],
        *,
        principal: Principal | None = None,
    ) -> None:
        """Append in order, each entry stored with who the run acts for; each entry id is
        idempotent, so a re-run step duplicates nothing."""
        if not entries:
            return
        request = AppendBatchRequest(
            session_id=session_id,
            entries=[
                BatchItem(entry_id=entry_id, message=message) for entry_id, message in entries
            ],
            principal=principal,
        )
        reply = await APPEND_BATCH.call(self._engine, request, timeout=self._timeout)
        self._extend(session_id, reply.results)

    def _extend(self, session_id: str, results: list[AppendResult]) -> None:
        """The cached path grown by the entries just appended, when they hang off its leaf one
        after the other: the next read then asks only for what others appended after them,
        instead of reading back what this process wrote. Anything else leaves the cache as it
        was, and the next read walks from its leaf as before."""
        view = self._history.get(session_id)
        if view is None or not view.ids:
            return
        leaf = view.leaf
        for result in results:
            entry = result.entry
            if entry.parent_id != leaf or entry.parent_session_id not in (None, session_id):
                return
            leaf = entry.entry_id
        view.ids.extend(result.entry.entry_id for result in results)
        view.messages.extend(result.entry.message for result in results)
        view.leaf = leaf

    async def messages(self, session_id: str) -> list[AgentMessage]:
        """The active path, oldest first."""
        return list((await self.view(session_id)).messages)

    async def path(self, session_id: str) -> list[tuple[str, AgentMessage]]:
        """The active path as (entry id, message), oldest first."""
        view = await self.view(session_id)
        return list(zip(view.ids, view.messages, strict=True))

    async def view(self, session_id: str) -> PathView:
        """The cached path brought up to date, not copied: read it, do not change it."""
        cached = self._history.get(session_id)
        request = MessagesRequest(
            session_id=session_id,
            since_entry_id=None if cached is None or not cached.ids else cached.leaf,
        )
        reply = await MESSAGES.call(self._engine, request, timeout=self._timeout)
        view = cached if cached is not None and cached.ids and reply.partial else None
        if view is None:
            view = PathView()
        view.ids.extend(item.entry_id for item in reply.messages)
        view.messages.extend(item.message for item in reply.messages)
        view.leaf = reply.leaf_id
        view.pinned = tuple(reply.pinned)
        if reply.leaf_id is None:
            self._history.pop(session_id, None)
        else:
            self._history[session_id] = view
            self._history.move_to_end(session_id)
            while len(self._history) > self._cache_size:
                self._history.popitem(last=False)
        return view

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
