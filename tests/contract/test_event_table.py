"""The events of ``agent::events`` are one table: each event declared once (its data model, then
its frame), :data:`AgentEvent` lists the frames, and everything else is read from it — and the
frames on the wire stay as readers (the TypeScript SDK, the console) know them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest

import tackroom.contracts.events as ev
from tackroom.contracts.events import (
    EVENT_TYPES,
    EVENTS,
    AgentEvent,
    EventData,
    attempt_key,
    event_id,
    event_of,
    event_type_of,
)

FRAMES_FILE = Path(__file__).parent / "event_frames.jsonl"
"""One stored frame of each event (two of ``approval_resolved``), as schema version 1 writes
them: written before the events became one table, and read back to the byte since."""


def _frames() -> list[type[Any]]:
    return list(get_args(get_args(AgentEvent)[0]))


def _declared_data_models() -> set[type[EventData]]:
    """Every public event data model the module declares."""
    return {
        value
        for name, value in vars(ev).items()
        if isinstance(value, type)
        and issubclass(value, EventData)
        and value is not EventData
        and not name.startswith("_")
    }


def test_every_declared_event_is_in_the_table_once() -> None:
    data_models = [frame.model_fields["data"].annotation for frame in _frames()]
    assert len(data_models) == len(set(data_models)) == 18
    assert set(data_models) == _declared_data_models()


def test_the_types_are_read_from_the_table_in_its_order() -> None:
    """The ``type`` of each frame, as readers know them (a rename is a new schema version)."""
    assert EVENT_TYPES == (
        "turn_state_changed",
        "message_update",
        "message_snapshot",
        "message_complete",
        "function_execution_start",
        "function_execution_end",
        "approval_requested",
        "approval_resolved",
        "gate_decision",
        "budget_decision",
        "context_assembled",
        "model_switch",
        "turn_end",
        "agent_end",
        "error",
        "subagent_started",
        "subagent_ended",
        "handoff",
    )


def _stored() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FRAMES_FILE.read_text().splitlines()]


def test_the_stored_frames_cover_every_event() -> None:
    assert {frame["type"] for frame in _stored()} == set(EVENT_TYPES)


@pytest.mark.parametrize("line", FRAMES_FILE.read_text().splitlines())
def test_a_stored_frame_reads_and_writes_back_to_the_byte(line: str) -> None:
    event = EVENTS.parse(json.loads(line))
    dumped = EVENTS.dump_event(event)
    assert json.dumps(dumped, ensure_ascii=False, separators=(",", ":")) == line


@pytest.mark.parametrize("frame", _stored(), ids=lambda frame: str(frame["type"]))
def test_the_data_model_decides_the_frame(frame: dict[str, Any]) -> None:
    data = EVENTS.parse(frame).data
    assert event_type_of(data) == frame["type"]
    again = event_of(
        session_id=frame["session_id"], run_id=frame["run_id"], event_id="r:x", data=data
    )
    assert again.type == frame["type"]
    assert again.data is data


def test_the_events_of_one_call_share_their_leading_fields() -> None:
    """The call events' data begins with the call and its function, in this order."""
    for data in (
        ev.FunctionExecutionStartData,
        ev.FunctionExecutionEndData,
        ev.ApprovalRequestedData,
        ev.ApprovalResolvedData,
        ev.GateDecidedData,
    ):
        assert list(data.model_fields)[:2] == ["function_call_id", "function_id"]


def test_a_later_attempt_of_a_step_gets_its_own_event_ids() -> None:
    assert attempt_key("t1:budget", 1) == "t1:budget"
    assert attempt_key("t1:budget", 2) == "t1:budget@2"
    assert event_id("r", attempt_key("t3:switch1", 4)) == "r:t3:switch1@4"


def test_data_of_no_event_says_what_to_do() -> None:
    with pytest.raises(TypeError, match="EventData is the data of no event: declare its frame"):
        event_of(session_id="s", run_id="r", event_id="r:x", data=EventData())
    with pytest.raises(TypeError, match="list the frame in AgentEvent"):
        event_type_of(EventData())
