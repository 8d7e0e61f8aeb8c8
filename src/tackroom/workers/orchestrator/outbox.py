"""A step's effects as the record carries them: committed first, applied after.

The driver commits the new turn record *with* the effects of the step that produced it (its
outbox), then applies them: session appends (idempotent by entry id) and event frames (ids fixed
by the step, data fixed by the commit). A delivery that finds an outbox after a crash applies it
again, skipping frames already stored, so a committed outcome is never recomputed and an event
id never carries two contents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tackroom.contracts.events import (
    EVENTS,
    EventData,
    MessageCompleteData,
    TurnEndData,
    event_id,
    event_of,
)
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

    A ``message_complete`` or ``turn_end`` event whose messages the same step appends refers
    to those entries instead of carrying a second copy of them.
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
        data, message_of, results_of = _by_reference(effect.data, appended)
        event = event_of(
            session_id=record.session_id,
            run_id=record.run_id,
            event_id=event_id(record.run_id, record.step, index),
            data=data,
        )
        frame = EVENTS.dump_event(event)
        if message_of is not None:
            del frame["data"]["message"]
        items.append(
            OutboxEvent.model_construct(
                kind="event", frame=frame, message_of=message_of, results_of=results_of
            )
        )
    return items


def _by_reference(
    data: EventData, appended: dict[int, str]
) -> tuple[EventData, str | None, list[str] | None]:
    """``data`` without the messages the step also appends, and the entries that hold them."""
    if isinstance(data, MessageCompleteData):
        message_of = appended.get(id(data.message))
        if message_of is not None:
            stripped = MessageCompleteData.model_construct(
                message_id=data.message_id, message=_STAND_IN, sent=data.sent
            )
            return stripped, message_of, None
    if isinstance(data, TurnEndData) and data.function_results:
        results_of = [appended.get(id(result)) for result in data.function_results]
        if all(entry_id is not None for entry_id in results_of):
            stripped_end = data.model_copy(update={"function_results": []})
            return stripped_end, None, [entry_id for entry_id in results_of if entry_id]
    return data, None, None


def frame_of(item: OutboxEvent, outbox: list[OutboxItem]) -> dict[str, Any]:
    """The frame ``item`` stores, its messages filled in from the entries it refers to."""
    if item.message_of is None and not item.results_of:
        return item.frame
    messages = {
        entry.entry_id: entry.message
        for other in outbox
        if isinstance(other, OutboxAppend)
        for entry in other.entries
    }
    data = dict(item.frame["data"])
    if item.message_of is not None:
        data["message"] = messages[item.message_of].model_dump(mode="json")
    if item.results_of:
        data["function_results"] = [
            messages[entry_id].model_dump(mode="json") for entry_id in item.results_of
        ]
    return {**item.frame, "data": data}


_STAND_IN = UserMessage(content=[])
"""Dumped in place of a message the frame takes from an entry (then dropped from the frame)."""


def with_outbox(
    record: TurnRecord,
    effects: list[Effect],
    *,
    events_seq: int,
    earlier: Sequence[tuple[TurnRecord, list[Effect]]] = (),
) -> TurnRecord:
    """``record`` carrying ``effects``, to be committed before any of them is applied.

    ``earlier``: the steps folded into this commit before this one (record, effects), whose
    effects come first; each step's events keep the ids of its own step number.
    """
    outbox = [item for step, done in earlier for item in outbox_of(step, done)]
    outbox += outbox_of(record, effects)
    return record.model_copy(update={"outbox": outbox, "events_seq": events_seq})
