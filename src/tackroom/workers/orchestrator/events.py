"""Appending :class:`AgentEvent` frames to ``agent::events`` (``turn_end`` also to its own)."""

from __future__ import annotations

from typing import Any

from tackroom.contracts.turn import (
    EVENTS_STREAM,
    TURN_END_STREAM,
    AgentEvent,
    EventType,
)
from tackroom.engine.protocol import Engine

__all__ = ["EventEmitter"]


class EventEmitter:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def emit(
        self, *, session_id: str, run_id: str, event_id: str, type: EventType, data: dict[str, Any]
    ) -> int:
        event = AgentEvent(
            type=type, session_id=session_id, run_id=run_id, event_id=event_id, data=data
        )
        frame = event.model_dump(mode="json")
        seq = await self._engine.append(EVENTS_STREAM, session_id, frame)
        if type == "turn_end":
            await self._engine.append(TURN_END_STREAM, session_id, frame)
        return seq
