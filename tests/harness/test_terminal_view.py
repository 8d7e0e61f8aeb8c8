"""The terminal view of a run: answers whose deltas were held back, retries, model switches."""

from __future__ import annotations

import io
from typing import Any

from tackroom.contracts.events import EVENTS
from tackroom.harness.terminal import TerminalView

FRAME: dict[str, Any] = {"session_id": "s1", "run_id": "r1"}


def _show(view: TerminalView, n: int, kind: str, data: dict[str, Any]) -> None:
    view.show(EVENTS.parse({**FRAME, "event_id": f"r1:{n}", "type": kind, "data": data}))


def _complete(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    return {"message_id": "m1", "message": message}


def test_an_answer_without_deltas_shows_when_complete() -> None:
    out, err = io.StringIO(), io.StringIO()
    view = TerminalView(out, err, json_lines=False)
    _show(view, 1, "message_complete", _complete("the password is [redacted]"))
    assert out.getvalue() == "the password is [redacted]"


def test_a_streamed_answer_is_not_shown_twice() -> None:
    out, err = io.StringIO(), io.StringIO()
    view = TerminalView(out, err, json_lines=False)
    update = {"message_id": "m1", "stream_id": "a", "kind": "text", "delta": "hi"}
    _show(view, 1, "message_update", update)
    _show(view, 2, "message_complete", _complete("hi"))
    assert out.getvalue() == "hi"


def test_a_new_stream_of_a_message_says_it_starts_over() -> None:
    out, err = io.StringIO(), io.StringIO()
    view = TerminalView(out, err, json_lines=False)
    _show(view, 1, "message_update", {"message_id": "m1", "stream_id": "a", "kind": "text",
                                      "delta": "```tool_call {bad"})  # fmt: skip
    _show(view, 2, "message_update", {"message_id": "m1", "stream_id": "b", "kind": "text",
                                      "delta": "fixed"})  # fmt: skip
    assert "starts over" in err.getvalue()
    assert out.getvalue().endswith("\nfixed")


def test_a_model_switch_is_a_note() -> None:
    out, err = io.StringIO(), io.StringIO()
    view = TerminalView(out, err, json_lines=False)
    switch = {
        "from_provider": "openai", "from_model": "gpt-5-mini", "to_provider": "anthropic",
        "to_model": "claude-haiku-4-5", "error_kind": "transient", "position": 1,
    }  # fmt: skip
    _show(view, 1, "model_switch", switch)
    assert err.getvalue() == (
        "model openai:gpt-5-mini failed (transient); switching to anthropic:claude-haiku-4-5\n"
    )
    assert out.getvalue() == ""


def test_joined_mid_answer_the_snapshot_then_the_deltas() -> None:
    out, err = io.StringIO(), io.StringIO()
    view = TerminalView(out, err, json_lines=False)
    parts = [{"kind": "thinking", "text": "hmm"}, {"kind": "text", "text": "Hello, "}]
    snapshot = {"message_id": "m1", "stream_id": "a", "parts": parts, "through": 2}
    _show(view, 1, "message_snapshot", snapshot)
    update = {"message_id": "m1", "stream_id": "a", "kind": "text", "delta": "world", "index": 3}
    _show(view, 1, "message_update", update)
    _show(view, 2, "message_complete", _complete("Hello, world"))
    assert (out.getvalue(), err.getvalue()) == ("Hello, world", "")
