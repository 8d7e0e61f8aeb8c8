"""The orchestrator's calls to the sessions worker, by function id (one place for the shapes)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from tackroom.contracts.messages import AgentMessage, messages_adapter
from tackroom.engine.protocol import Engine

__all__ = ["SessionsClient"]


class SessionsClient:
    """Calls by function id; keeps the validated history of recently active sessions.

    A model call needs the whole transcript; reading and validating it every time made a turn
    cost grow with the session. The cache keeps each session's messages with the entry id they
    end at and asks the sessions worker only for what came after (``since_entry_id``); when the
    worker cannot answer that way (another branch became active), it reads the whole path.
    """

    def __init__(self, engine: Engine, *, timeout: float = 30.0, cache_size: int = 1024) -> None:
        self._engine = engine
        self._timeout = timeout
        self._cache_size = cache_size
        self._history: OrderedDict[str, tuple[str, list[AgentMessage]]] = OrderedDict()

    async def ensure(self, session_id: str) -> None:
        await self._engine.trigger(
            "session-tree::ensure", {"session_id": session_id}, timeout=self._timeout
        )

    async def append(self, session_id: str, entries: list[tuple[str, AgentMessage]]) -> None:
        """Append in order; each entry id is idempotent, so a re-run step duplicates nothing."""
        if not entries:
            return
        await self._engine.trigger(
            "session-tree::append_batch",
            {
                "session_id": session_id,
                "entries": [
                    {"entry_id": entry_id, "message": message.model_dump(mode="json")}
                    for entry_id, message in entries
                ],
            },
            timeout=self._timeout,
        )

    async def messages(self, session_id: str) -> list[AgentMessage]:
        """The active path, oldest first."""
        cached = self._history.get(session_id)
        request: dict[str, Any] = {"session_id": session_id}
        if cached is not None:
            request["since_entry_id"] = cached[0]
        reply = await self._engine.trigger("session-tree::messages", request, timeout=self._timeout)
        fresh = messages_adapter.validate_python([item["message"] for item in reply["messages"]])
        messages = [*cached[1], *fresh] if cached is not None and reply.get("partial") else fresh
        leaf = reply.get("leaf_id")
        if leaf is None:
            self._history.pop(session_id, None)
        else:
            self._history[session_id] = (leaf, messages)
            self._history.move_to_end(session_id)
            while len(self._history) > self._cache_size:
                self._history.popitem(last=False)
        return list(messages)

    async def peek(self, session_id: str, name: str) -> list[Any]:
        reply = await self._engine.trigger(
            "session-inbox::peek", {"session_id": session_id, "name": name}, timeout=self._timeout
        )
        items: list[Any] = reply["items"]
        return items

    async def remove(self, session_id: str, name: str, items: list[Any]) -> None:
        """Remove what a peek returned, if still at the head: repeating it removes nothing."""
        await self._engine.trigger(
            "session-inbox::remove",
            {"session_id": session_id, "name": name, "items": items},
            timeout=self._timeout,
        )

    async def push(self, session_id: str, name: str, item: Any) -> None:
        await self._engine.trigger(
            "session-inbox::push",
            {"session_id": session_id, "name": name, "item": item},
            timeout=self._timeout,
        )
