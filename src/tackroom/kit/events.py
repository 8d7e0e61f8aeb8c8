"""The one emitter of ``agent::events``: typed events in, stored frames out.

Every writer of the event stream — the orchestrator's steps, the approvals worker's decisions —
appends through :class:`EventEmitter`, so every frame has the same shape and the same id scheme
(:func:`tackroom.contracts.events.event_id`). A ``turn_end`` event also goes to
``agent::turn_end``, the stream a compactor wakes on; a security-relevant event also makes its
audit fact on ``audit::facts`` (:mod:`tackroom.kit.audit_facts`). An event and what goes with it
are one unit of work: one transaction where the engine makes units atomic (embedded), else
written in that order (a crash in between re-emits them all, and the audit keeps a fact once).
"""

from __future__ import annotations

from typing import Any, Protocol

from tackroom.contracts.audit import AuditFact
from tackroom.contracts.events import (
    EVENTS,
    TURN_END,
    AgentEvent,
    EventData,
    TurnEnd,
    event_id,
    event_of,
)
from tackroom.engine import protocol as engine
from tackroom.engine.protocol import Transactions
from tackroom.kit.audit import record_fact
from tackroom.kit.audit_facts import AUDITED, fact_of

__all__ = ["Appender", "EventEmitter"]


class Appender(engine.Appender, Transactions, Protocol):
    """What the emitter needs of an engine: stream appends, in a unit of work."""


class EventEmitter:
    def __init__(self, engine: Appender) -> None:
        self._engine = engine

    async def emit(self, event: AgentEvent) -> int:
        """Append ``event`` to the session's events; returns its sequence."""
        frame = EVENTS.dump_event(event)
        return await self._write(
            event.session_id, frame, turn_end=isinstance(event, TurnEnd), fact=fact_of(event)
        )

    async def emit_frame(self, session_id: str, frame: dict[str, Any]) -> int:
        """Append a frame :meth:`Stream.dump_event` made earlier (a committed outbox keeps them)."""
        kind = frame.get("type")
        fact = fact_of(EVENTS.parse(frame)) if kind in AUDITED else None
        return await self._write(session_id, frame, turn_end=kind == "turn_end", fact=fact)

    async def _write(
        self, session_id: str, frame: dict[str, Any], *, turn_end: bool, fact: AuditFact | None
    ) -> int:
        if not turn_end and fact is None:
            return await self._engine.append(EVENTS.name, session_id, frame)
        # The audit fact after the event: should they not commit together, a crash in between
        # re-emits both. In an atomic unit the sequence is the one the event is expected to get
        # (a later one, if another writer appends to the session first): a cursor that lags.
        async with self._engine.transaction():
            seq = await self._engine.append(EVENTS.name, session_id, frame)
            if turn_end:
                await self._engine.append(TURN_END.name, session_id, frame)
            if fact is not None:
                await record_fact(self._engine, fact)
        return seq

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
