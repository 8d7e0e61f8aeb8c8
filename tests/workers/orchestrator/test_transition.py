"""The turn state machine, as a table: (state, event) → (state, effects). No event loop."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tackroom.contracts.approvals import DecisionRecord
from tackroom.contracts.events import EVENTS, MessageCompleteData, event_of
from tackroom.contracts.messages import (
    AssistantMessage,
    CustomMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    TextBlock,
    UserMessage,
    text_of,
)
from tackroom.contracts.tools import ToolTraits
from tackroom.contracts.turn import TurnState
from tackroom.workers.orchestrator.outbox import frame_of, with_outbox
from tackroom.workers.orchestrator.record import OutboxEvent, ToolOffer, TurnRecord
from tackroom.workers.orchestrator.transition import (
    AbortRequested,
    AppendEntries,
    ApprovalsRead,
    AssistantCompleted,
    BudgetRefused,
    CallsSettled,
    EmitEvent,
    InboxDrained,
    Provisioned,
    StepEvent,
    StepFailed,
    Transition,
    TransitionError,
    transition,
)

ADD = ToolOffer(
    name="calc__add",
    function_id="calc::add",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    traits=ToolTraits(idempotent=True, parallel=True),
)


def record(state: TurnState = "provisioning", **changes: Any) -> TurnRecord:
    base = TurnRecord(
        session_id="s1", run_id="r1", provider="scripted", model="m", state=state, tools=[ADD]
    )
    return base.model_copy(update=changes)


def say(text: str, stop: Any = "end") -> AssistantMessage:
    return AssistantMessage(content=[TextBlock(text=text)], stop_reason=stop)


def calls(*args: tuple[str, str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(
        content=[FunctionCallBlock(id=i, tool_name=name, arguments=a) for i, name, a in args],
        stop_reason="function_call",
    )


def result(call_id: str, text: str = "5") -> FunctionResultMessage:
    return FunctionResultMessage(
        function_call_id=call_id, function_id="calc::add", content=[TextBlock(text=text)]
    )


def events(t: Transition) -> list[str]:
    return [e.type for e in t.effects if isinstance(e, EmitEvent)]


def appended(t: Transition) -> list[str]:
    return [
        entry_id for e in t.effects if isinstance(e, AppendEntries) for entry_id, _ in e.entries
    ]


def after_calls(**changes: Any) -> TurnRecord:
    """A record in function_execute with one planned call ``c1`` to calc::add(2, 3)."""
    t = transition(
        record("assistant_streaming"),
        AssistantCompleted(calls(("c1", "calc__add", {"a": 2, "b": 3}))),
    )
    return t.record.model_copy(update=changes)


TABLE: list[tuple[str, TurnRecord, StepEvent, TurnState, list[str]]] = [
    (
        "provisioned",
        record(),
        Provisioned("You are helpful.", [ADD]),
        "assistant_streaming",
        ["turn_state_changed"],
    ),
    (
        "text answer ends the model turn",
        record("assistant_streaming"),
        AssistantCompleted(say("hi")),
        "steering_check",
        ["turn_state_changed", "message_complete", "turn_end"],
    ),
    (
        "calls go to execution",
        record("assistant_streaming"),
        AssistantCompleted(calls(("c1", "calc__add", {"a": 2, "b": 3}))),
        "function_execute",
        ["turn_state_changed", "message_complete"],
    ),
    (
        "a provider error stops the turn visibly",
        record("assistant_streaming"),
        AssistantCompleted(say("", stop="error")),
        "stopped",
        ["turn_state_changed", "message_complete", "turn_end", "agent_end"],
    ),
    (
        "the budget refuses the next model call",
        record("assistant_streaming"),
        BudgetRefused("cap of $1.00 reached"),
        "stopped",
        ["turn_state_changed", "message_complete", "agent_end"],
    ),
    (
        "settled batch",
        after_calls(),
        CallsSettled(results={"c1": result("c1")}),
        "steering_check",
        ["turn_state_changed", "turn_end"],
    ),
    (
        "a parked call waits for approval",
        after_calls(),
        CallsSettled(parked={"c1": "policy asks"}),
        "function_awaiting_approval",
        ["turn_state_changed", "approval_requested"],
    ),
    (
        "nothing left to say ends the run",
        record("steering_check"),
        InboxDrained([]),
        "stopped",
        ["turn_state_changed", "agent_end"],
    ),
    (
        "a steering message continues",
        record("steering_check"),
        InboxDrained([UserMessage.text("also do x")]),
        "assistant_streaming",
        ["turn_state_changed"],
    ),
    (
        "abort",
        after_calls(),
        AbortRequested("user pressed stop"),
        "stopped",
        ["turn_state_changed", "message_complete", "agent_end"],
    ),
    (
        "unexpected failure",
        record("assistant_streaming"),
        StepFailed("transition_error", "boom"),
        "failed",
        ["turn_state_changed", "error", "agent_end"],
    ),
]


@pytest.mark.parametrize(
    ("start", "event", "end", "emitted"),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_transition_table(
    start: TurnRecord, event: StepEvent, end: TurnState, emitted: list[str]
) -> None:
    t = transition(start, event)
    assert t.record.state == end
    assert events(t) == emitted
    assert t.record.step == start.step + 1
    assert start.state != "stopped"  # the input record is never modified


def test_the_input_record_is_not_modified() -> None:
    start = after_calls()
    snapshot = start.model_dump()
    transition(start, CallsSettled(results={"c1": result("c1")}))
    assert start.model_dump() == snapshot


def test_events_that_do_not_fit_the_state_are_errors() -> None:
    with pytest.raises(TransitionError, match="does not apply"):
        transition(record("provisioning"), InboxDrained([]))
    with pytest.raises(TransitionError, match="takes no events"):
        transition(record("stopped"), AbortRequested("x"))
    with pytest.raises(TransitionError, match="neither settled nor parked"):
        transition(after_calls(), CallsSettled())


def test_entry_ids_are_deterministic_per_run() -> None:
    t = transition(
        record("assistant_streaming"),
        AssistantCompleted(calls(("c1", "calc__add", {"a": 2, "b": 3}))),
    )
    assert appended(t) == ["r1-t1-a"]
    settled = transition(t.record, CallsSettled(results={"c1": result("c1")}))
    assert appended(settled) == ["r1-fr-c1"]


def test_unknown_tool_and_bad_arguments_are_answered_with_the_reason() -> None:
    message = calls(("c1", "nope", {}), ("c2", "calc__add", {"a": "two", "b": 3}))
    t = transition(record("assistant_streaming"), AssistantCompleted(message))
    first, second = t.record.calls
    assert first.status == second.status == "done"
    assert first.result is not None
    assert "unknown tool 'nope'" in text_of(first.result.content)
    assert second.result is not None
    assert "a: 'two' is not of type 'number'" in text_of(second.result.content)
    assert events(t).count("function_execution_end") == 2


def test_approval_decisions() -> None:
    two = transition(
        record("assistant_streaming"),
        AssistantCompleted(
            calls(("c1", "calc__add", {"a": 1, "b": 1}), ("c2", "calc__add", {"a": 2, "b": 2}))
        ),
    ).record
    parked = transition(two, CallsSettled(parked={"c1": "ask", "c2": "ask"})).record

    nothing = transition(parked, ApprovalsRead({}))
    assert not nothing.changed
    assert nothing.record is parked

    one = transition(parked, ApprovalsRead({"c1": DecisionRecord(decision="allow")})).record
    assert one.state == "function_awaiting_approval"
    assert [c.status for c in one.calls] == ["approved", "parked"]

    both = transition(
        one, ApprovalsRead({"c2": DecisionRecord(decision="deny", reason="not today")})
    ).record
    assert both.state == "function_execute"
    denied = both.calls[1].result
    assert denied is not None
    assert denied.is_error
    assert denied.details["denied_by"] == "user"
    assert "not today" in text_of(denied.content)


def test_max_turns_stops_with_a_note() -> None:
    start = after_calls(turn_count=8, max_turns=8)
    settled = transition(start, CallsSettled(results={"c1": result("c1")})).record
    t = transition(settled, InboxDrained([]))
    assert t.record.state == "stopped"
    assert t.record.stop_reason == "max_turns"
    [(_, note)] = [entry for e in t.effects if isinstance(e, AppendEntries) for entry in e.entries]
    assert isinstance(note, CustomMessage)
    assert "max_turns (8)" in text_of(note.content)


def test_the_same_call_more_than_three_times_stops_the_loop() -> None:
    r = record("assistant_streaming", max_turns=50)
    for turn in range(1, 6):
        r = transition(
            r, AssistantCompleted(calls((f"c{turn}", "calc__add", {"a": 1, "b": 1})))
        ).record
        r = transition(r, CallsSettled(results={f"c{turn}": result(f"c{turn}")})).record
        r = transition(r, InboxDrained([])).record
        if r.state == "stopped":
            break
    assert r.stop_reason == "loop_detected"
    assert turn == 4


def test_abort_answers_every_open_call() -> None:
    parked = transition(after_calls(), CallsSettled(parked={"c1": "ask"})).record
    t = transition(parked, AbortRequested("stop"))
    assert t.record.stop_reason == "aborted"
    assert appended(t) == ["r1-fr-c1", "r1-stop-aborted"]
    assert t.record.calls[0].result is not None


def test_entry_ids_stay_valid_whatever_the_provider_call_id() -> None:
    r = record()
    assert r.entry_id("fr-call_1") == "r1-fr-call_1"
    odd = r.entry_id("fr-a/b c")
    assert odd.startswith("r1-h")
    assert "/" not in odd
    assert " " not in odd
    assert odd == r.entry_id("fr-a/b c")
    assert len(r.entry_id("fr-" + "x" * 300)) <= 200


def test_provisioning_appends_the_runs_own_messages_once() -> None:
    start = record(initial_messages=[UserMessage.text("hi"), UserMessage.text("and this")])
    t = transition(start, Provisioned("p", [ADD]))
    assert appended(t) == ["r1-m0", "r1-m1"]
    assert t.record.initial_messages == []


def test_no_event_modifies_the_record_it_was_given() -> None:
    """Every rule that mutates calls or counts works on copies (the copy is shallow elsewhere)."""
    two = transition(
        record("assistant_streaming"),
        AssistantCompleted(
            calls(("c1", "calc__add", {"a": 1, "b": 1}), ("c2", "calc__add", {"a": 2, "b": 2}))
        ),
    ).record
    parked = transition(two, CallsSettled(parked={"c2": "ask"}, results={"c1": result("c1")}))
    decided = transition(parked.record, ApprovalsRead({"c2": DecisionRecord(decision="deny")}))
    for before, event in (
        (two, CallsSettled(parked={"c2": "ask"}, results={"c1": result("c1")})),
        (parked.record, ApprovalsRead({"c2": DecisionRecord(decision="deny")})),
        (parked.record, AbortRequested("stop")),
        (decided.record, CallsSettled(results={"c2": result("c2")})),
    ):
        snapshot = before.model_dump()
        transition(before, event)
        assert before.model_dump() == snapshot


def test_a_call_id_the_model_reuses_is_renamed_in_the_message_and_its_call() -> None:
    first = transition(
        record("assistant_streaming"),
        AssistantCompleted(calls(("c1", "calc__add", {"a": 1, "b": 1}))),
    ).record
    again = transition(
        first.model_copy(update={"state": "assistant_streaming", "calls": []}),
        AssistantCompleted(
            calls(("c1", "calc__add", {"a": 2, "b": 2}), ("c1", "calc__add", {"a": 3, "b": 3}))
        ),
    )
    assert [call.id for call in again.record.calls] == ["c1_2", "c1_3"]
    assert again.record.call_ids == ["c1", "c1_2", "c1_3"]
    [appended] = [effect for effect in again.effects if isinstance(effect, AppendEntries)]
    [(_, stored)] = appended.entries
    assert isinstance(stored, AssistantMessage)
    assert [block.id for block in stored.function_calls()] == ["c1_2", "c1_3"]
    assert again.record.last_assistant is None  # kept for a child run only


def test_the_outbox_carries_the_steps_effects_with_stable_event_ids() -> None:
    step = transition(record(), Provisioned("p", [ADD]))
    step.record.initial_messages = []
    boxed = with_outbox(step.record, step.effects, events_seq=7)
    assert boxed.events_seq == 7
    frames = [item.frame for item in boxed.outbox if isinstance(item, OutboxEvent)]
    assert [f["event_id"] for f in frames] == ["r1:1:0"]
    again = TurnRecord.model_validate(boxed.model_dump(mode="json"))
    assert again.outbox == boxed.outbox


def test_the_outbox_holds_an_answer_once_and_its_event_frame_takes_it_from_the_entry() -> None:
    answer = say("the long answer")
    step = transition(record("assistant_streaming"), AssistantCompleted(answer))
    boxed = with_outbox(step.record, step.effects, events_seq=0)
    stored = json.dumps(boxed.model_dump(mode="json"))
    assert stored.count("the long answer") == 1  # in the entry; not in the frame, nor the record
    [complete] = [
        item
        for item in boxed.outbox
        if isinstance(item, OutboxEvent) and item.frame["type"] == "message_complete"
    ]
    assert complete.message_of == "r1-t1-a"
    assert "message" not in complete.frame["data"]
    # After a round trip through storage, the applied frame is the whole event, as it was.
    again = TurnRecord.model_validate(json.loads(stored))
    [item] = [i for i in again.outbox if isinstance(i, OutboxEvent) and i.message_of]
    frame = frame_of(item, again.outbox)
    expected = event_of(
        session_id=frame["session_id"],
        run_id="r1",
        event_id=frame["event_id"],
        data=MessageCompleteData(message_id="r1-t1-a", message=answer),
    )
    assert EVENTS.parse(frame) == expected


def test_a_settled_batch_holds_each_result_once_in_the_record() -> None:
    done = result("c1", "a long result")
    settled = transition(after_calls(), CallsSettled(results={"c1": done}))
    boxed = with_outbox(settled.record, settled.effects, events_seq=0)
    stored = json.dumps(boxed.model_dump(mode="json"))
    assert stored.count("a long result") == 1  # the entry: not the call, nor the turn_end frame
    [turn_end] = [
        item
        for item in boxed.outbox
        if isinstance(item, OutboxEvent) and item.frame["type"] == "turn_end"
    ]
    assert turn_end.results_of == ["r1-fr-c1"]
    frame = frame_of(turn_end, TurnRecord.model_validate(json.loads(stored)).outbox)
    [applied] = frame["data"]["function_results"]
    assert FunctionResultMessage.model_validate(applied) == done
    # The next steering check still sees a batch whose results the model has to read.
    assert transition(settled.record, InboxDrained([])).record.state == "assistant_streaming"
