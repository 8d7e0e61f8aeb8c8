"""The terminal waterfall and trace list: pure functions of the store's replies, golden text."""

from __future__ import annotations

from typing import Any

from tackroom.cli.waterfall import format_duration, render_trace_list, render_waterfall
from tackroom.contracts.traces import SpanRecord, TraceDetail, TraceSummary
from tackroom.workers.traces.worker import by_session

TRACE = "ab" * 16
BASE = 1_800_000_000_000_000_000


def at(ms: float) -> int:
    return BASE + int(ms * 1e6)


def record(
    sid: str, parent: str | None, name: str, start: float, end: float, **more: Any
) -> SpanRecord:
    attributes = {k.replace("__", "."): v for k, v in more.pop("attributes", {}).items()}
    return SpanRecord(
        trace_id=TRACE,
        span_id=sid * 16,
        parent_span_id=None if parent is None else parent * 16,
        name=name,
        start_ns=at(start),
        end_ns=at(end),
        attributes=attributes,
        **more,
    )


FAILED_CALL = {
    "gen_ai__request__model": "gpt-5-mini",
    "error__type": "transient",
    "tackroom__retry_count": 2,
}
ANSWER = {
    "gen_ai__request__model": "gpt-5-mini",
    "gen_ai__response__model": "gpt-5-mini-2025",
    "gen_ai__usage__input_tokens": 120,
    "gen_ai__usage__output_tokens": 14,
    "tackroom__cost_usd": 0.0021,
    "gen_ai__response__finish_reasons": ["stop"],
    "tackroom__retry_count": 0,
}

DETAIL = TraceDetail(
    trace_id=TRACE,
    run_id="run-1",
    session_id="s-1",
    spans=[  # out of order on purpose: the tree is rebuilt from the parent ids
        record("5", "2", "trigger provider::openai::stream", 160, 190),
        record("1", None, "trigger run::start", 0, 4),
        record("2", "1", "queue turn::step", 5, 200),
        record("3", "2", "trigger provider::openai::stream", 10, 150),
        record(
            "4", "3", "chat gpt-5-mini", 11, 149, status="error",
            status_message="HTTP 500 (server_error): the server had an error",
            attributes=FAILED_CALL,
        ),
        record("6", "5", "chat gpt-5-mini", 161, 189, attributes=ANSWER),
        record("7", "2", "trigger calc::add", 192, 193.5),
        record("8", "f", "an orphan: its parent is elsewhere", 195, 196),
    ],
)  # fmt: skip

GOLDEN = """\
trace abababababababababababababababab  run run-1  session s-1  200.0ms  8 spans  1 error
  offset  duration  span                          |
 +0.00ms     4.0ms  trigger run::start            |#                           |
  +5.0ms   195.0ms    queue turn::step            |############################|
 +10.0ms   140.0ms      trigger provider::openai~ | ####################       |
 +11.0ms   138.0ms        ! chat gpt-5-mini       | xxxxxxxxxxxxxxxxxxxx       |
+160.0ms    30.0ms      trigger provider::openai~ |                      ##### |
+161.0ms    28.0ms        chat gpt-5-mini         |                      ##### |
+192.0ms     1.5ms      trigger calc::add         |                          ##|
+195.0ms     1.0ms  an orphan: its parent is els~ |                           #|
  ! chat gpt-5-mini: model gpt-5-mini, error transient: HTTP 500 (server_error): the server \
had an error, 2 retries
  - chat gpt-5-mini: model gpt-5-mini-2025, 120 in / 14 out tokens, $0.0021, finish stop
"""


def test_a_waterfall_is_a_tree_on_a_time_axis_with_notes() -> None:
    assert render_waterfall(DETAIL, width=80) == GOLDEN


def test_every_row_fits_the_width_and_a_narrow_terminal_gets_the_minimum() -> None:
    for width, expected in ((80, 80), (120, 120), (20, 60)):
        rows = render_waterfall(DETAIL, width=width).splitlines()[2:10]
        assert {len(row) for row in rows} == {expected}, (width, rows)


def test_durations_read_in_the_unit_that_fits() -> None:
    assert [format_duration(ns) for ns in (310_000, 12_340_000, 2_500_000_000)] == [
        "0.31ms",
        "12.3ms",
        "2.50s",
    ]


def summary(trace: str, name: str, start_ms: float, **fields: Any) -> TraceSummary:
    return TraceSummary(
        trace_id=trace * 32,
        root_name=name,
        start_ns=at(start_ms),
        duration_ms=12.5,
        span_count=20,
        status="error" if fields.get("error_count") else "ok",
        **fields,
    )


def test_the_list_groups_traces_by_session_newest_first() -> None:
    traces = [
        summary("c", "trigger run::start", 3000, run_id="run-3", session_id="s-1"),
        summary("b", "trigger models::check", 2000),
        summary("a", "trigger run::start", 0, run_id="run-1", session_id="s-1", error_count=2),
    ]
    assert render_trace_list(traces, by_session(traces)) == (
        "session s-1\n"
        f"  {'c' * 32}  2027-01-15 08:00:03Z    12.5ms    20 spans  ok          run-3"
        "  trigger run::start\n"
        f"  {'a' * 32}  2027-01-15 08:00:00Z    12.5ms    20 spans  2 error(s)  run-1"
        "  trigger run::start\n"
        "(no session)\n"
        f"  {'b' * 32}  2027-01-15 08:00:02Z    12.5ms    20 spans  ok          -"
        "  trigger models::check\n"
    )
    assert render_trace_list([], []) == "no traces stored\n"
