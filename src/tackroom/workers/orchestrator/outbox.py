"""A step's effects as the record carries them: committed first, applied after.

The driver commits the new turn record *with* the effects of the step that produced it (its
outbox), then applies them: session appends (idempotent by entry id) and event frames (ids fixed
by the step, data fixed by the commit). A delivery that finds an outbox after a crash applies it
again, skipping frames already stored, so a committed outcome is never recomputed and an event
id never carries two contents.
"""

from __future__ import annotations

from tackroom.contracts.events import EVENTS, event_id, event_of
from tackroom.workers.orchestrator.record import (
    OutboxAppend,
    OutboxEntry,
    OutboxEvent,
    OutboxItem,
    TurnRecord,
)
from tackroom.workers.orchestrator.transition import AppendEntries, Effect

__all__ = ["outbox_of", "with_outbox"]


def outbox_of(record: TurnRecord, effects: list[Effect]) -> list[OutboxItem]:
    """``effects`` as outbox items; the event of effect ``i`` is ``<run_id>:<step>:<i>``."""
    items: list[OutboxItem] = []
    for index, effect in enumerate(effects):
        if isinstance(effect, AppendEntries):
            # The messages were validated where they were made: no second validation here.
            items.append(
                OutboxAppend.model_construct(
                    kind="append",
                    entries=[
                        OutboxEntry.model_construct(entry_id=entry_id, message=message)
                        for entry_id, message in effect.entries
                    ],
                )
            )
        else:
            event = event_of(
                session_id=record.session_id,
                run_id=record.run_id,
                event_id=event_id(record.run_id, record.step, index),
                data=effect.data,
            )
            items.append(OutboxEvent.model_construct(kind="event", frame=EVENTS.dump_event(event)))
    return items


def with_outbox(record: TurnRecord, effects: list[Effect], *, events_seq: int) -> TurnRecord:
    """``record`` carrying ``effects``, to be committed before any of them is applied."""
    return record.model_copy(
        update={"outbox": outbox_of(record, effects), "events_seq": events_seq}
    )
