"""Seed 003's lifecycle as a view of the turn: the mapping, and the state every log record and
span made inside a run's step carries — with no field written at the log call."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, get_args

import pytest

from tackroom import Harness, ToolCall
from tackroom.contracts.lifecycle import (
    LIFECYCLE_ATTRIBUTE,
    LIFECYCLE_OF_STATE,
    LIFECYCLE_STATES,
    lifecycle_of,
)
from tackroom.contracts.messages import AgentMessage
from tackroom.contracts.turn import TurnState
from tackroom.kit.lifecycle import (
    OUTSIDE,
    LifecycleFilter,
    in_step,
    install_lifecycle_logging,
    span_attributes,
)
from tackroom.testing import FunctionModel, ModelInfo
from tackroom.testing.spans import SpanRecorder

_model_log = logging.getLogger("test.lifecycle.model")
_tool_log = logging.getLogger("test.lifecycle.tool")


def test_every_turn_state_maps_to_one_lifecycle_state() -> None:
    assert set(LIFECYCLE_OF_STATE) == set(get_args(TurnState))
    assert set(LIFECYCLE_OF_STATE.values()) <= set(LIFECYCLE_STATES)
    assert [lifecycle_of(state) for state in get_args(TurnState)] == [
        "IDLE",
        "THINKING",
        "ACTING",
        "ACTING",
        "OBSERVING",
        "FINISHED",
        "ERROR",
    ]
    assert lifecycle_of("stopped", error=True) == "ERROR"
    assert lifecycle_of("steering_check", error=True) == "OBSERVING"
    assert lifecycle_of(None) == "IDLE"


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("x", logging.INFO, __file__, 1, message, None, None)


def _says(record: logging.LogRecord, *fields: str) -> tuple[Any, ...]:
    """The fields the filter stamped on ``record`` (``None``: absent)."""
    return tuple(vars(record).get(name) for name in fields)


def test_the_filter_stamps_inside_a_step_and_keeps_what_a_record_says_itself() -> None:
    stamp = LifecycleFilter()
    outside = _record("outside")
    assert stamp.filter(outside)
    assert _says(outside, "lifecycle", "turn_state") == (OUTSIDE, OUTSIDE)
    assert not hasattr(outside, "session_id")
    with in_step(session_id="s1", run_id="r1", state="function_execute"):
        inside = _record("inside")
        own = _record("own")
        vars(own)["session_id"] = "given"  # as logging's extra= sets it
        assert stamp.filter(inside)
        assert stamp.filter(own)
        assert span_attributes() == {LIFECYCLE_ATTRIBUTE: "ACTING"}
    assert _says(inside, "lifecycle", "turn_state", "session_id", "run_id") == (
        "ACTING",
        "function_execute",
        "s1",
        "r1",
    )
    assert _says(own, "session_id", "run_id") == ("given", "r1")
    assert span_attributes() == {}
    with in_step(session_id="s1", run_id="r1", state="stopped", error=True):
        failed = _record("failed")
        stamp.filter(failed)
    assert _says(failed, "lifecycle") == ("ERROR",)


def test_installing_twice_puts_one_filter_on_each_root_handler() -> None:
    handler = logging.NullHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        first = install_lifecycle_logging()
        assert install_lifecycle_logging() is first
        assert handler.filters.count(first) == 1
    finally:
        root.removeHandler(handler)


def note(text: str) -> str:
    """Keep a note."""
    _tool_log.warning("tool keeps %s", text)
    return "kept"


def answer(messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
    _model_log.warning("model reads %d messages", len(messages))
    if not any(m.role == "function_result" for m in messages):
        return ToolCall("note", {"text": "milk"})
    return "done"


async def test_log_lines_from_the_model_call_and_the_tool_carry_the_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spans = SpanRecorder()
    caplog.set_level(logging.INFO)
    harness = Harness(
        FunctionModel(answer),
        home=tmp_path,
        tools=[note],
        auto_approve=True,
        tracer_provider=spans.provider,
    )
    async with harness:
        result = await harness.run("remember milk", session="s1")
    assert result.output == "done"
    stamped = {
        r.getMessage(): _says(r, "lifecycle", "turn_state", "session_id", "run_id")
        for r in caplog.records
        if r.name.startswith("test.lifecycle")
    }
    assert stamped == {
        "model reads 1 messages": ("THINKING", "assistant_streaming", "s1", result.run_id),
        "tool keeps milk": ("ACTING", "function_execute", "s1", result.run_id),
        "model reads 3 messages": ("THINKING", "assistant_streaming", "s1", result.run_id),
    }

    def lifecycles(name: str) -> list[Any]:
        return [
            span.attributes.get(LIFECYCLE_ATTRIBUTE)
            for span in spans.named(name)
            if span.attributes
        ]

    assert lifecycles("turn.step provisioning") == ["IDLE"]
    assert lifecycles("turn.step assistant_streaming") == ["THINKING", "THINKING"]
    assert lifecycles("turn.step function_execute") == ["ACTING"]
    assert set(lifecycles("turn.step steering_check")) == {"OBSERVING"}
    assert lifecycles("execute_tool note") == ["ACTING"]
    chat = [s for s in spans.spans() if s.name.startswith("chat ")]
    assert chat, spans.names()
    assert {s.attributes.get(LIFECYCLE_ATTRIBUTE) for s in chat if s.attributes} == {"THINKING"}
