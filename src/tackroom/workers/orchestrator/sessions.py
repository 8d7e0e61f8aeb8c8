"""The orchestrator's calls to the sessions worker, by function id (one place for the shapes)."""

from __future__ import annotations

from typing import Any

from tackroom.contracts.messages import AgentMessage, messages_adapter
from tackroom.engine.protocol import Engine

__all__ = ["SessionsClient"]


class SessionsClient:
    def __init__(self, engine: Engine, *, timeout: float = 30.0) -> None:
        self._engine = engine
        self._timeout = timeout

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
        reply = await self._engine.trigger(
            "session-tree::messages", {"session_id": session_id}, timeout=self._timeout
        )
        return messages_adapter.validate_python([item["message"] for item in reply["messages"]])

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
