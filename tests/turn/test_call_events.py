"""The events of one function call name its function one way, wherever they are made: the gate,
the dispatcher, the transition (a call settled as planned) and the parking of a call."""

from __future__ import annotations

from pathlib import Path

from tackroom.contracts.messages import FunctionResultMessage, TextBlock
from tackroom.testing import Script
from tackroom.workers.orchestrator.callevents import (
    approval_requested,
    call_ended,
    call_started,
    function_of,
)
from tackroom.workers.orchestrator.record import CallState
from tests.turn.harness import (
    RECORD,
    FakePolicy,
    events_of,
    policy_harness,
    record_call,
    wait_for_state,
)

_CALL_EVENTS = ("gate_decision", "function_execution_start", "function_execution_end")


def test_a_call_to_a_tool_not_offered_names_the_tool() -> None:
    known = CallState(id="c1", tool_name="calc__add", function_id="calc::add", arguments={"a": 1})
    unknown = CallState(id="c2", tool_name="nope", function_id=None, arguments={})
    result = FunctionResultMessage(
        function_call_id="c2", function_id="nope", content=[TextBlock(text="no")]
    )
    assert (function_of(known), function_of(unknown)) == ("calc::add", "nope")
    for call in (known, unknown):
        named = {
            call_started(call).function_id,
            call_ended(call, result).function_id,
            approval_requested(call, reason="asks").function_id,
        }
        assert named == {function_of(call)}
    end = call_ended(unknown, result, duration_ms=0)
    assert (end.function_call_id, end.is_error, end.duration_ms) == ("c2", False, 0)


async def test_every_event_of_a_call_names_the_same_function(tmp_path: Path) -> None:
    script = Script(
        [
            {
                "tool_calls": [
                    {"function_id": "calc::add", "arguments": {"a": 1, "b": 2}, "id": "add"},
                    {"name": "not_offered", "arguments": {}, "id": "lost"},
                    record_call("rec", "n1"),
                ]
            },
        ]
    )
    policy = FakePolicy({RECORD: "needs_approval"})
    async with policy_harness(tmp_path, script, policy) as harness:
        await harness.start("s", "add, guess and record", run_id="run")
        await wait_for_state(harness, "s", "function_awaiting_approval")
        events = [r.data for r in await events_of(harness.engine, "s")]

    named: dict[str, dict[str, str]] = {}
    for event in events:
        if event["type"] in (*_CALL_EVENTS, "approval_requested"):
            data = event["data"]
            named.setdefault(data["function_call_id"], {})[event["type"]] = data["function_id"]
    assert named == {
        "add": dict.fromkeys(_CALL_EVENTS, "calc::add"),
        "lost": {"function_execution_end": "not_offered"},
        "rec": {"gate_decision": RECORD, "approval_requested": RECORD},
    }
    # A call's start and end keep their ids however often the step is delivered.
    ids = {e["event_id"] for e in events if e["data"].get("function_call_id") == "add"}
    assert {"run:add:start", "run:add:end"} <= ids
