"""What runs did after they read untrusted content: folded from the sessions' stored events.

The events on ``agent::events`` are the one record that holds all three things the question
needs: the label of each function result (``function_execution_end`` carries the result with its
provenance ``label``), the calls the model asked for afterwards with their arguments (the
assistant's ``message_complete``), and the gate's decision on each with its rule
(``gate_decision``, ``approval_resolved``, ``function_execution_start``/``_end``). The audit log
keeps digests only, and no labels.

A call counts when the model asked for it in an answer that came after the read (a call asked
for in the same answer as the fetch did not see what it fetched). A read taints the rest of its
session: later runs of the session had it in their context too.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from typing import Any

from tackroom.contracts import sessions as tree
from tackroom.contracts.auditflows import FlowCall, FlowRead, FlowReport, FlowRun
from tackroom.contracts.engine import STREAM_READ, StreamReadRequest
from tackroom.contracts.events import EVENTS
from tackroom.contracts.tenancy import owns
from tackroom.engine.protocol import Caller

__all__ = ["flows_of", "flows_report", "summarize_arguments"]

_PAGE = 1000
_VALUE_CHARS = 40
_SUMMARY_CHARS = 160


def summarize_arguments(arguments: dict[str, Any]) -> str:
    """``path="notes/a.txt", content="Dear all, …" (812 chars)``: names and the start of each
    value, on one line."""
    parts = [f"{name}={_short(value)}" for name, value in arguments.items()]
    text = ", ".join(parts)
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    flat = " ".join(text.split())
    if len(flat) <= _VALUE_CHARS:
        return json.dumps(flat, ensure_ascii=False) if isinstance(value, str) else flat
    cut = flat[: _VALUE_CHARS - 1] + "…"
    shown = json.dumps(cut, ensure_ascii=False) if isinstance(value, str) else cut
    return f"{shown} ({len(text)} chars)"


def _untrusted_origins(holder: Any, pattern: str) -> list[str] | None:
    """The origins of an untrusted label that match ``pattern`` (``None``: no such label)."""
    if not isinstance(holder, dict):
        return None
    label = holder.get("label")
    if not isinstance(label, dict) or label.get("source") != "untrusted":
        return None
    origins = [str(o) for o in label.get("origins") or []]
    if not origins and isinstance(holder.get("function_id"), str):
        origins = [holder["function_id"]]
    if any(fnmatch.fnmatchcase(origin, pattern) for origin in origins):
        return origins
    return None


@dataclass
class _Run:
    run_id: str
    started_at: float
    principal: str | None = None
    calls: dict[str, FlowCall] = field(default_factory=dict)


@dataclass
class _Session:
    """The fold of one session's events."""

    session_id: str
    pattern: str
    read: FlowRead | None = None
    runs: dict[str, _Run] = field(default_factory=dict)
    principals: dict[str, str] = field(default_factory=dict)

    def add(self, frame: dict[str, Any], at: float) -> None:
        run_id = frame.get("run_id")
        data = frame.get("data")
        if not isinstance(run_id, str) or not isinstance(data, dict):
            return
        kind = frame.get("type")
        if kind == "turn_state_changed":
            who = data.get("principal")
            if isinstance(who, dict) and isinstance(who.get("id"), str):
                self.principals.setdefault(run_id, who["id"])
        if self.read is None:
            self._maybe_read(kind, data, run_id, at)
            return
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = _Run(run_id, at, self.principals.get(run_id))
        if kind == "message_complete":
            self._asked(run, data.get("message"), at)
        else:
            self._decided(run, kind, data)

    def _maybe_read(self, kind: Any, data: dict[str, Any], run_id: str, at: float) -> None:
        if kind == "function_execution_end":
            origins = _untrusted_origins(data.get("result"), self.pattern)
        elif kind == "message_complete":
            origins = _untrusted_origins(data.get("message"), self.pattern)
        else:
            return
        if origins is None:
            return
        self.read = FlowRead(
            function_id=str(data.get("function_id", "")),
            function_call_id=str(data.get("function_call_id", "")),
            origins=origins,
            run_id=run_id,
            at=at,
        )
        self.runs[run_id] = _Run(run_id, at, self.principals.get(run_id))

    def _asked(self, run: _Run, message: Any, at: float) -> None:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "function_call":
                arguments = block.get("arguments")
                run.calls[str(block.get("id"))] = FlowCall(
                    function_call_id=str(block.get("id")),
                    function_id=str(block.get("tool_name", "")),
                    arguments=summarize_arguments(arguments if isinstance(arguments, dict) else {}),
                    at=at,
                )

    def _decided(self, run: _Run, kind: Any, data: dict[str, Any]) -> None:
        call = run.calls.get(str(data.get("function_call_id")))
        if call is None:
            return  # asked for before the read: not what this query is about
        if isinstance(data.get("function_id"), str):
            call.function_id = data["function_id"]  # the function behind the tool's name
        if kind == "gate_decision":
            call.decision = data.get("decision")
            call.decided_by = data.get("decided_by")
            call.rule_id = data.get("rule_id")
        elif kind == "approval_resolved":
            call.approval = data.get("decision")
        elif kind == "function_execution_start":
            call.ran = True
        elif kind == "function_execution_end":
            call.is_error = bool(data.get("is_error"))

    def flows(self) -> list[FlowRun]:
        if self.read is None:
            return []
        return [
            FlowRun(
                session_id=self.session_id,
                run_id=run.run_id,
                principal=run.principal or self.principals.get(run.run_id),
                started_at=run.started_at,
                read=self.read,
                calls=sorted(run.calls.values(), key=lambda c: c.at, reverse=True),
            )
            for run in self.runs.values()
        ]


def flows_of(
    session_id: str, events: list[tuple[float, dict[str, Any]]], *, source: str
) -> list[FlowRun]:
    """The runs of one session that read content from ``source`` (a glob), from its events
    (``(timestamp, frame)`` in order)."""
    fold = _Session(session_id, source)
    for at, frame in events:
        fold.add(frame, at)
    return fold.flows()


async def _events(caller: Caller, session_id: str) -> list[tuple[float, dict[str, Any]]]:
    found: list[tuple[float, dict[str, Any]]] = []
    after = 0
    while True:
        request = StreamReadRequest(
            stream=EVENTS.name, group_id=session_id, after=after, limit=_PAGE
        )
        page = (await STREAM_READ.call(caller, request)).records
        found.extend((r.timestamp, r.data) for r in page if isinstance(r.data, dict))
        if len(page) < _PAGE:
            return found
        after = page[-1].seq


async def flows_report(
    caller: Caller,
    *,
    source: str,
    tenant: str | None,
    since: float | None,
    max_sessions: int = 1000,
) -> FlowReport:
    """The report over the newest ``max_sessions`` sessions (of ``tenant``, else all) that
    changed since ``since``."""
    runs: list[FlowRun] = []
    scanned = 0
    cursor: str | None = None
    while True:
        page = await tree.LIST.call(
            caller, tree.ListRequest(limit=100, cursor=cursor, order="desc")
        )
        for info in page.sessions:
            if tenant is not None and not owns(tenant, info.session_id):
                continue
            if since is not None and info.updated_at < since:
                continue
            if scanned >= max_sessions:
                return _report(runs, source, tenant, since, scanned, truncated=True)
            scanned += 1
            events = await _events(caller, info.session_id)
            found = flows_of(info.session_id, events, source=source)
            runs.extend(run for run in found if since is None or _last(run) >= since)
        cursor = page.next_cursor
        if cursor is None:
            return _report(runs, source, tenant, since, scanned, truncated=False)


def _last(run: FlowRun) -> float:
    return max([run.started_at, *(call.at for call in run.calls)])


def _report(
    runs: list[FlowRun],
    source: str,
    tenant: str | None,
    since: float | None,
    scanned: int,
    *,
    truncated: bool,
) -> FlowReport:
    runs.sort(key=lambda run: run.started_at, reverse=True)
    return FlowReport(
        source=source,
        since=since,
        tenant=tenant,
        runs=runs,
        sessions_scanned=scanned,
        truncated=truncated,
    )
