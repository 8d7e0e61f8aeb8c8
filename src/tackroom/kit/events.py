"""The one emitter of ``agent::events``: typed events in, stored frames out.

Every writer of the event stream — the orchestrator's steps, the approvals worker's decisions —
appends through :class:`EventEmitter`, so every frame has the same shape and the same id scheme
(:func:`tackroom.contracts.events.event_id`). A ``turn_end`` event also goes to
``agent::turn_end``, the stream a compactor wakes on; a security-relevant event also makes its
audit fact on ``audit::facts`` (:mod:`tackroom.kit.audit_facts`).
"""

from __future__ import annotations

from typing import Any, Protocol

from tackroom.contracts.events import (
    EVENTS,
    TURN_END,
    AgentEvent,
    EventData,
    TurnEnd,
    event_id,
    event_of,
)
from tackroom.kit.audit import record_fact
from tackroom.kit.audit_facts import AUDITED, fact_of

__all__ = ["Appender", "EventEmitter"]


class Appender(Protocol):
    """What the emitter needs of an engine: stream appends."""

    async def append(self, stream: str, group_id: str, data: Any) -> int: ...


class EventEmitter:
    def __init__(self, engine: Appender) -> None:
        self._engine = engine

    async def emit(self, event: AgentEvent) -> int:
        """Append ``event`` to the session's events; returns its sequence."""
        frame = EVENTS.dump_event(event)
        seq = await self._engine.append(EVENTS.name, event.session_id, frame)
        if isinstance(event, TurnEnd):
            await self._engine.append(TURN_END.name, event.session_id, frame)
        await self._audit(event)
        return seq

    async def emit_frame(self, session_id: str, frame: dict[str, Any]) -> int:
        """Append a frame :meth:`Stream.dump_event` made earlier (a committed outbox keeps them)."""
        seq = await self._engine.append(EVENTS.name, session_id, frame)
        if frame.get("type") == "turn_end":
            await self._engine.append(TURN_END.name, session_id, frame)
        if frame.get("type") in AUDITED:
            await self._audit(EVENTS.parse(frame))
        return seq

    async def _audit(self, event: AgentEvent) -> None:
        """The event's audit fact, if it makes one, on ``audit::facts`` (after the event: a crash
        in between re-emits both, and the audit keeps a fact once)."""
        fact = fact_of(event)
        if fact is not None:
            await record_fact(self._engine, fact)

    async def emit_data(
        self, *, session_id: str, run_id: str, key: tuple[str | int, ...], data: EventData
    ) -> int:
        """Emit ``data`` as the event ``<run_id>:<key…>`` of ``run_id``."""
        return await self.emit(
            event_of(
                session_id=session_id,
                run_id=run_id,
                event_id=event_id(run_id, *key),
                data=data,
            )
        )
