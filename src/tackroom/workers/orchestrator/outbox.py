"""A step's effects as the record carries them: committed first, applied after.

The driver commits the new turn record *with* the effects of the step that produced it (its
outbox), then applies them: session appends (idempotent by entry id) and event frames (ids fixed
by the step, data fixed by the commit). A delivery that finds an outbox after a crash applies it
again, skipping frames already stored, so a committed outcome is never recomputed and an event
id never carries two contents.
"""

from __future__ import annotations

from typing import Any

from tackroom.contracts.events import EVENTS, MessageCompleteData, event_id, event_of
from tackroom.contracts.messages import UserMessage
from tackroom.workers.orchestrator.record import (
    OutboxAppend,
    OutboxEntry,
    OutboxEvent,
    OutboxItem,
    TurnRecord,
)
from tackroom.workers.orchestrator.transition import AppendEntries, Effect

__all__ = ["frame_of", "outbox_of", "with_outbox"]


def outbox_of(record: TurnRecord, effects: list[Effect]) -> list[OutboxItem]:
    """``effects`` as outbox items; the event of effect ``i`` is ``<run_id>:<step>:<i>``.

    A ``message_complete`` event for a message the same step appends refers to that entry
    instead of carrying a second copy of the message.
    """
    appended: dict[int, str] = {}
    items: list[OutboxItem] = []
    for index, effect in enumerate(effects):
        if isinstance(effect, AppendEntries):
            # The messages were validated where they were made: no second validation here.
            appended.update((id(message), entry_id) for entry_id, message in effect.entries)
            items.append(
                OutboxAppend.model_construct(
                    kind="append",
                    entries=[
                        OutboxEntry.model_construct(entry_id=entry_id, message=message)
                        for entry_id, message in effect.entries
                    ],
                )
            )
            continue
        data, message_of = effect.data, None
        if isinstance(data, MessageCompleteData):
            message_of = appended.get(id(data.message))
            if message_of is not None:
                data = MessageCompleteData.model_construct(
                    message_id=data.message_id, message=_STAND_IN
                )
        event = event_of(
            session_id=record.session_id,
            run_id=record.run_id,
            event_id=event_id(record.run_id, record.step, index),
            data=data,
        )
        frame = EVENTS.dump_event(event)
        if message_of is not None:
            del frame["data"]["message"]
        items.append(OutboxEvent.model_construct(kind="event", frame=frame, message_of=message_of))
    return items


def frame_of(item: OutboxEvent, outbox: list[OutboxItem]) -> dict[str, Any]:
    """The frame ``item`` stores: its message filled in from its entry when it refers to one."""
    if item.message_of is None:
        return item.frame
    message = next(
        entry.message
        for other in outbox
        if isinstance(other, OutboxAppend)
        for entry in other.entries
        if entry.entry_id == item.message_of
    )
    data = {**item.frame["data"], "message": message.model_dump(mode="json")}
    return {**item.frame, "data": data}


_STAND_IN = UserMessage(content=[])
"""Dumped in place of a message the frame takes from an entry (then dropped from the frame)."""


def with_outbox(record: TurnRecord, effects: list[Effect], *, events_seq: int) -> TurnRecord:
    """``record`` carrying ``effects``, to be committed before any of them is applied."""
    return record.model_copy(
        update={"outbox": outbox_of(record, effects), "events_seq": events_seq}
    )
