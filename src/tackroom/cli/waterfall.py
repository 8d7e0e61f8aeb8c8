"""Traces as plain text: a waterfall of one trace, and a list of traces grouped by session.

Pure functions of the ``traces::*`` replies (no I/O, no clock, no colour), so the output is the
same on every terminal and in a golden test. A waterfall line is one span: its offset from the
trace's start, its duration, its name indented by depth (children under their parent, by start
time; a span whose parent is not in the trace is a root), and a bar on a time axis scaled to
``width``. Error spans are marked ``!`` and drawn with ``x``; notes under the waterfall give each
model call's model, tokens and cost, and each error's type, message and retries.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from tackroom.contracts.traces import SessionTraces, SpanRecord, TraceDetail, TraceSummary

__all__ = ["MIN_WIDTH", "format_duration", "render_trace_list", "render_waterfall"]

MIN_WIDTH = 60
_TIME_COLUMNS = 20  # "+123.4ms  123.4ms  "


def format_duration(ns: int) -> str:
    ms = ns / 1e6
    if ms < 1:
        return f"{ms:.2f}ms"
    if ms < 1000:
        return f"{ms:.1f}ms"
    return f"{ms / 1000:.2f}s"


def _ordered(spans: list[SpanRecord]) -> Iterator[tuple[int, SpanRecord]]:
    """``(depth, span)`` depth first, siblings by start time."""
    ids = {span.span_id for span in spans}
    children: dict[str | None, list[SpanRecord]] = {}
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else None
        children.setdefault(parent, []).append(span)
    for group in children.values():
        group.sort(key=lambda span: (span.start_ns, span.span_id))
    stack = [(0, span) for span in reversed(children.get(None, []))]
    while stack:
        depth, span = stack.pop()
        yield depth, span
        stack.extend((depth + 1, child) for child in reversed(children.get(span.span_id, [])))


def _bar(span: SpanRecord, *, origin: int, total: int, width: int) -> str:
    start = (span.start_ns - origin) * width // total
    end = max(start + 1, -(-(span.end_ns - origin) * width // total))
    start, end = min(start, width - 1), min(end, width)
    mark = "x" if span.status == "error" else "#"
    return " " * start + mark * (end - start) + " " * (width - end)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "~"


def _note(span: SpanRecord) -> str | None:
    attributes = span.attributes
    parts: list[str] = []
    if "gen_ai.request.model" in attributes:
        model = attributes.get("gen_ai.response.model") or attributes["gen_ai.request.model"]
        parts.append(f"model {model}")
        if "gen_ai.usage.input_tokens" in attributes:
            parts.append(
                f"{attributes['gen_ai.usage.input_tokens']} in /"
                f" {attributes.get('gen_ai.usage.output_tokens', 0)} out tokens"
            )
        cost = attributes.get("tackroom.cost_usd")
        if isinstance(cost, (int, float)) and cost:
            parts.append(f"${cost:.4f}")
        reasons = attributes.get("gen_ai.response.finish_reasons")
        if isinstance(reasons, list) and reasons:
            parts.append(f"finish {','.join(str(r) for r in reasons)}")
    if span.status == "error":
        error = attributes.get("error.type")
        parts.append(f"error {error}: {span.status_message or ''}".rstrip(": "))
    retries = attributes.get("tackroom.retry_count")
    if isinstance(retries, int) and retries:
        parts.append(f"{retries} retr{'y' if retries == 1 else 'ies'}")
    if not parts:
        return None
    mark = "!" if span.status == "error" else "-"
    return f"  {mark} {span.name}: {', '.join(parts)}"


def render_waterfall(trace: TraceDetail, *, width: int = 100) -> str:
    """``trace`` as a text waterfall at most ``width`` columns wide (at least :data:`MIN_WIDTH`)."""
    width = max(width, MIN_WIDTH)
    spans = trace.spans
    head = [f"trace {trace.trace_id}"]
    if trace.run_id:
        head.append(f"run {trace.run_id}")
    if trace.session_id:
        head.append(f"session {trace.session_id}")
    if not spans:
        return "  ".join([*head, "no spans"]) + "\n"
    origin = min(span.start_ns for span in spans)
    total = max(1, max(span.end_ns for span in spans) - origin)
    errors = sum(span.status == "error" for span in spans)
    head += [format_duration(total), f"{len(spans)} spans"]
    if errors:
        head.append(f"{errors} error{'s' if errors > 1 else ''}")
    rows = list(_ordered(spans))
    names = [("  " * depth) + ("! " if s.status == "error" else "") + s.name for depth, s in rows]
    room = width - _TIME_COLUMNS - 2
    name_width = min(max(len(name) for name in names), max(16, room // 2))
    bar_width = room - name_width - 1
    lines = ["  ".join(head), f"{'offset':>8}  {'duration':>8}  {'span':<{name_width}} |"]
    for (_, span), name in zip(rows, names, strict=True):
        bar = _bar(span, origin=origin, total=total, width=bar_width)
        lines.append(
            f"{'+' + format_duration(span.start_ns - origin):>8}"
            f"  {format_duration(span.end_ns - span.start_ns):>8}"
            f"  {_cut(name, name_width):<{name_width}} |{bar}|"
        )
    notes = [note for _, span in rows if (note := _note(span)) is not None]
    return "\n".join([*lines, *notes]) + "\n"


def _when(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def render_trace_list(traces: list[TraceSummary], sessions: list[SessionTraces]) -> str:
    """Traces grouped by session (the session of the newest trace first), one line each."""
    if not traces:
        return "no traces stored\n"
    by_id = {trace.trace_id: trace for trace in traces}
    lines: list[str] = []
    for group in sessions:
        lines.append(f"session {group.session_id}" if group.session_id else "(no session)")
        for trace_id in group.trace_ids:
            trace = by_id[trace_id]
            status = "ok" if trace.status == "ok" else f"{trace.error_count} error(s)"
            lines.append(
                f"  {trace.trace_id}  {_when(trace.start_ns)}"
                f"  {format_duration(int(trace.duration_ms * 1e6)):>8}"
                f"  {trace.span_count:>4} spans  {status:<10}"
                f"  {trace.run_id or '-'}  {trace.root_name}"
            )
    return "\n".join(lines) + "\n"
