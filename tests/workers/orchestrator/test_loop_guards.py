"""The loop guards as transitions (no event loop): the same tool in a row whatever its arguments
is steered once, then stopped; the identical-call guard stays; limits come from the record."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tackroom.contracts.guards import DEFAULT_PER_TOOL, LoopGuard
from tackroom.contracts.messages import (
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    TextBlock,
    text_of,
)
from tackroom.contracts.tools import ToolTraits
from tackroom.workers.orchestrator.record import ToolOffer, TurnRecord
from tackroom.workers.orchestrator.transition import (
    AppendEntries,
    AssistantCompleted,
    CallsSettled,
    InboxDrained,
    transition,
)

SEARCH = ToolOffer(name="search", function_id="web::search", traits=ToolTraits(parallel=True))
FETCH = ToolOffer(name="fetch", function_id="web::fetch")
PAGE = ToolOffer(name="results__read", function_id="results::read")


def start(**changes: Any) -> TurnRecord:
    REFUSED.clear()
    record = TurnRecord(
        session_id="s1",
        run_id="r1",
        provider="scripted",
        model="m",
        state="assistant_streaming",
        max_turns=50,
        tools=[SEARCH, FETCH, PAGE],
    )
    return record.model_copy(update=changes)


def answer(turn: int, *calls: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(
        content=[
            FunctionCallBlock(id=f"c{turn}-{n}", tool_name=name, arguments=arguments)
            for n, (name, arguments) in enumerate(calls)
        ],
        stop_reason="function_call",
    )


def result(call_id: str) -> FunctionResultMessage:
    return FunctionResultMessage(
        function_call_id=call_id, function_id="web::search", content=[TextBlock(text="edge case")]
    )


REFUSED: list[str] = []
"""The calls the guard refused in the turns :func:`one_turn` played (reset by :func:`start`)."""


def one_turn(r: TurnRecord, turn: int, *calls: tuple[str, dict[str, Any]]) -> TurnRecord:
    """The model answers with ``calls``; the calls it may make run; the steering check."""
    r = transition(r, AssistantCompleted(answer(turn, *calls))).record
    REFUSED.extend(c.id for c in r.calls if c.result is not None and c.result.is_error)
    ran = {c.id: result(c.id) for c in r.calls if c.status == "pending"}
    r = transition(r, CallsSettled(results=ran)).record
    return transition(r, InboxDrained([])).record if r.state == "steering_check" else r


def refused(r: TurnRecord) -> list[str]:
    return list(REFUSED)


def test_shifting_arguments_are_steered_once_then_stopped() -> None:
    r = start()
    for turn in range(1, 4):  # three searches in a row: allowed (the limit is 3)
        r = transition(r, AssistantCompleted(answer(turn, ("search", {"q": f"v{turn}"})))).record
        assert [c.status for c in r.calls] == ["pending"]
        r = transition(r, CallsSettled(results={f"c{turn}-0": result(f"c{turn}-0")})).record
        r = transition(r, InboxDrained([])).record
    assert r.tool_streak is not None
    assert (r.tool_streak.turns, r.tool_streak.steered) == (3, False)

    fourth = transition(r, AssistantCompleted(answer(4, ("search", {"q": "v4"}))))
    [call] = fourth.record.calls
    assert call.status == "done"  # never reaches the gate or the tool
    assert call.result is not None
    assert call.result.details == {
        "error": "tool_loop",
        "function_id": "web::search",
        "in_a_row": 4,
        "limit": 3,
        "stopping": False,
    }
    assert "[LOOP]" in text_of(call.result.content)
    assert "Stop calling search" in text_of(call.result.content)
    r = transition(fourth.record, CallsSettled()).record  # nothing left to run
    r = transition(r, InboxDrained([])).record
    assert r.state == "assistant_streaming"  # steered, not stopped
    # what a delivery after a crash reads: the committed record, streak and warning included
    r = TurnRecord.model_validate(r.model_dump(mode="json"))

    fifth = transition(r, AssistantCompleted(answer(5, ("search", {"q": "v5"}))))
    assert fifth.record.calls[0].result is not None
    assert fifth.record.calls[0].result.details["stopping"] is True
    r = transition(fifth.record, CallsSettled()).record
    stopped = transition(r, InboxDrained([]))
    assert (stopped.record.state, stopped.record.stop_reason) == ("stopped", "tool_loop")
    [(note_id, note)] = [
        entry for e in stopped.effects if isinstance(e, AppendEntries) for entry in e.entries
    ]
    assert note_id == "r1-stop-tool_loop"
    assert text_of(note.content) == (
        "Stopped: the model called web::search 5 times in a row (the limit is 3) and went on"
        " after it was told it was looping."
    )


def test_a_model_that_listens_is_not_stopped_and_a_new_streak_is_steered_again() -> None:
    r = start()
    for turn in range(1, 5):
        r = one_turn(r, turn, ("search", {"q": f"v{turn}"}))
    assert r.tool_streak is not None
    assert r.tool_streak.steered
    r = one_turn(r, 5, ("fetch", {"url": "https://example.org"}))  # it changed course
    assert r.state == "assistant_streaming"
    assert r.tool_streak is not None
    assert r.tool_streak.function_id == "web::fetch"
    for turn in range(6, 10):
        r = one_turn(r, turn, ("search", {"q": f"w{turn}"}))
    assert r.state == "assistant_streaming"  # the new streak's 4th turn: steered, not stopped
    assert refused(r) == ["c4-0", "c9-0"]


def test_a_legitimate_sequence_below_the_limit_is_untouched() -> None:
    r = start()
    for turn, name in enumerate(["search", "search", "search", "fetch", "search", "search"], 1):
        r = one_turn(r, turn, (name, {"q": f"v{turn}"}))
        assert refused(r) == []
        assert r.state == "assistant_streaming"
    assert r.tool_streak is not None
    assert r.tool_streak.turns == 2


def test_a_turn_of_several_calls_of_the_tool_counts_once_and_a_mixed_turn_ends_the_streak() -> None:
    r = start()
    for turn in range(1, 4):
        r = one_turn(r, turn, *[("search", {"q": f"v{turn}-{n}"}) for n in range(5)])
    assert r.tool_streak is not None
    assert r.tool_streak.turns == 3
    assert refused(r) == []
    r = one_turn(r, 4, ("search", {"q": "x"}), ("fetch", {"url": "u"}))
    assert r.tool_streak is None
    assert refused(r) == []


def test_per_tool_limits_exact_glob_and_none() -> None:
    guard = LoopGuard(same_tool_limit=2, per_tool={"web::*": 5, "web::fetch": None})
    assert guard.limit_for("web::search") == 5
    assert guard.limit_for("web::fetch") is None
    assert guard.limit_for("fs::read") == 2
    assert guard.limit_for("results::read") is None  # paging a clipped result: by default
    r = start(loop_guard=guard)
    for turn in range(1, 6):
        r = one_turn(r, turn, ("search", {"q": f"v{turn}"}))
    assert refused(r) == []  # 5 is web::*'s limit
    r = one_turn(r, 6, ("search", {"q": "v6"}))
    assert refused(r) == ["c6-0"]
    r = start(loop_guard=LoopGuard(same_tool_limit=None))
    for turn in range(1, 12):
        r = one_turn(r, turn, ("search", {"q": f"v{turn}"}))
    assert refused(r) == []
    assert r.state == "assistant_streaming"


def test_results_read_pages_on_under_the_default_guard() -> None:
    r = start()
    for turn in range(1, 10):
        r = one_turn(r, turn, ("results__read", {"call_id": "c1", "offset": turn * 1000}))
    assert refused(r) == []
    assert r.state == "assistant_streaming"


def test_the_identical_call_guard_stays_and_takes_its_limit_from_the_record() -> None:
    r = start(loop_guard=LoopGuard(same_tool_limit=None, identical_call_limit=2))
    for turn in range(1, 5):
        r = one_turn(r, turn, ("search", {"q": "same"}))
        if r.state == "stopped":
            break
    assert (r.stop_reason, turn) == ("loop_detected", 3)
    r = start()  # the defaults: the 4th identical call is steered, and the run stops there
    for turn in range(1, 6):
        r = one_turn(r, turn, ("search", {"q": "same"}))
        if r.state == "stopped":
            break
    assert (r.stop_reason, turn) == ("loop_detected", 4)


def test_bad_guard_settings_are_refused_with_the_field_named() -> None:
    with pytest.raises(ValidationError, match="same_tool_limit"):
        LoopGuard(same_tool_limit=0)
    with pytest.raises(ValidationError, match="per_tool"):
        LoopGuard.model_validate({"per_tool": {"web::*": -1}})
    assert LoopGuard.model_validate({"per_tool": {"a::b": 4}}).per_tool == {
        **DEFAULT_PER_TOOL,
        "a::b": 4,
    }


def test_an_old_record_without_the_guard_fields_reads_with_the_defaults() -> None:
    raw = start().model_dump(mode="json")
    raw.pop("loop_guard")
    raw.pop("tool_streak")
    r = TurnRecord.model_validate(raw)
    assert (r.loop_guard, r.tool_streak) == (None, None)
    for turn in range(1, 5):
        r = one_turn(r, turn, ("search", {"q": f"v{turn}"}))
    assert refused(r) == ["c4-0"]
