"""A finished run's cassette, read from what the orchestrator and the sessions worker stored.

The turn record gives the provider, the model, the system prompt and the tools offered (the
session's current run in scope ``turns``; an earlier run's in :data:`RUNS_SCOPE`, kept when the
next run replaced it); the session tree gives every message with its timestamp; the run's
``agent::events`` give the gate, approval and budget decisions; the call ledger gives each
call's result and duration. Deltas are not stored (they go to live readers only): a model
call's chunks are its answer's blocks, one each — or, for a run recorded before deltas went
live-only, the ``message_update`` events it stored. Everything goes through the engine's and the
sessions worker's functions, so a command line reads a cassette from a ``tackroom serve`` as
well as from an engine it opened itself.
"""

from __future__ import annotations

import json
from typing import Any

from tackroom.contracts.bus import Caller
from tackroom.contracts.cassette import (
    ApprovalRecord,
    BudgetRecord,
    Cassette,
    CassetteEntry,
    CassetteTool,
    GateRecord,
    ModelExchange,
    StreamChunk,
    ToolExchange,
)
from tackroom.contracts.engine import (
    STATE_GET,
    STATE_LIST,
    STREAM_READ,
    StateGetRequest,
    StateListRequest,
    StreamReadRequest,
)
from tackroom.contracts.events import EVENTS
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    TextBlock,
    ThinkingBlock,
)
from tackroom.contracts.sessions import MESSAGES, MessagesRequest
from tackroom.workers.orchestrator.dispatch import LEDGER_SCOPE
from tackroom.workers.orchestrator.record import RUNS_SCOPE, TURNS_SCOPE, TurnRecord, runs_key

__all__ = ["NoCassette", "read_cassette"]


class NoCassette(LookupError):
    """No finished run answers to the id given; the message says what to give instead."""


async def read_cassette(bus: Caller, run: str, *, session: str | None = None) -> Cassette:
    """The cassette of ``run``: a run id, or a session id (its latest run)."""
    record = await _find_record(bus, run, session=session)
    if not record.terminal:
        raise NoCassette(
            f"run {record.run_id} of session {record.session_id} is still {record.state}:"
            " replay a run once it has ended"
        )
    reply = await MESSAGES.call(bus, MessagesRequest(session_id=record.session_id))
    prefix = f"{record.run_id}-"
    path = [CassetteEntry(entry_id=m.entry_id, message=m.message) for m in reply.messages]
    first = next((i for i, e in enumerate(path) if e.entry_id.startswith(prefix)), len(path))
    history, own = path[:first], [e for e in path[first:] if e.entry_id.startswith(prefix)]
    frames = _Frames(await _run_events(bus, record))
    calls = _call_blocks(record, own)
    tool_calls = [await _tool_exchange(bus, record, entry, frames, calls) for entry in own]
    return Cassette(
        session_id=record.session_id,
        run_id=record.run_id,
        provider=record.provider,
        model=record.model,
        mode=record.mode,
        max_turns=record.max_turns,
        principal=record.principal,
        system_prompt=record.system_prompt,
        tools=[CassetteTool.model_validate(tool.model_dump()) for tool in record.tools],
        history=history,
        inputs=_inputs(record, own),
        messages=own,
        exchanges=_exchanges(history, own, frames),
        tool_calls=[call for call in tool_calls if call is not None],
        budget=_budget(frames.budget),
        state="failed" if record.state == "failed" else "stopped",
        stop_reason=record.stop_reason,
        usage=record.usage,
    )


async def _find_record(bus: Caller, run: str, *, session: str | None) -> TurnRecord:
    sessions = [session] if session is not None else [run]
    for session_id in sessions:
        current = await _state(bus, TURNS_SCOPE, session_id)
        if current is not None:
            record = TurnRecord.model_validate(current)
            if session is None or record.run_id == run:
                return record
        if session is not None:
            earlier = await _state(bus, RUNS_SCOPE, runs_key(session_id, run))
            if earlier is not None:
                return TurnRecord.model_validate(earlier)
    listed = await STATE_LIST.call(bus, StateListRequest(scope=TURNS_SCOPE))
    for item in listed.items:
        if isinstance(item.value, dict) and item.value.get("run_id") == run:
            return TurnRecord.model_validate(item.value)
    earlier_runs = await STATE_LIST.call(bus, StateListRequest(scope=RUNS_SCOPE))
    for item in earlier_runs.items:
        if item.key.endswith(f"/{run}"):
            return TurnRecord.model_validate(item.value)
    raise NoCassette(
        f"no run or session {run!r} on this engine: give a session id (its latest run) or a"
        " run id (`tackroom sessions list` shows the sessions)"
    )


async def _state(bus: Caller, scope: str, key: str) -> Any:
    found = await STATE_GET.call(bus, StateGetRequest(scope=scope, key=key))
    return None if found is None else found.value


async def _run_events(bus: Caller, record: TurnRecord) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    after = 0
    while True:
        request = StreamReadRequest(
            stream=EVENTS.name, group_id=record.session_id, after=after, limit=1000
        )
        page = (await STREAM_READ.call(bus, request)).records
        frames.extend(
            r.data
            for r in page
            if isinstance(r.data, dict) and r.data.get("run_id") == record.run_id
        )
        if len(page) < 1000:
            return frames
        after = page[-1].seq


def _inputs(record: TurnRecord, own: list[CassetteEntry]) -> list[AgentMessage]:
    """The messages the run started with: provisioning appended them as ``<run>-m<i>`` (the
    record lets go of them once they are in the session)."""
    if record.initial_messages:
        return list(record.initial_messages)
    by_id = {entry.entry_id: entry.message for entry in own}
    inputs: list[AgentMessage] = []
    while (message := by_id.get(record.entry_id(f"m{len(inputs)}"))) is not None:
        inputs.append(message)
    return inputs


class _Frames:
    """The run's events, indexed once: deltas by message, decisions by call."""

    def __init__(self, frames: list[dict[str, Any]]) -> None:
        self.updates: dict[str, list[dict[str, Any]]] = {}
        self.by_call: dict[tuple[str, str], dict[str, Any]] = {}
        self.budget: list[dict[str, Any]] = []
        for frame in frames:
            kind, data = frame.get("type"), frame.get("data")
            if not isinstance(data, dict):
                continue
            if kind == "message_update":
                self.updates.setdefault(str(data.get("message_id")), []).append(data)
            elif kind in ("gate_decision", "approval_resolved"):
                kept = {k: v for k, v in data.items() if k not in _NOT_KEPT}
                self.by_call[(str(kind), str(data.get("function_call_id")))] = kept
            elif kind == "budget_decision":
                self.budget.append(frame)


def _exchanges(
    history: list[CassetteEntry], own: list[CassetteEntry], frames: _Frames
) -> list[ModelExchange]:
    exchanges: list[ModelExchange] = []
    for index, entry in enumerate(own):
        if isinstance(entry.message, AssistantMessage):
            exchanges.append(
                ModelExchange(
                    turn=len(exchanges) + 1,
                    context=len(history) + index,
                    chunks=_chunks(entry.entry_id, entry.message, frames),
                    response=entry.message,
                )
            )
    return exchanges


def _chunks(message_id: str, message: AssistantMessage, frames: _Frames) -> list[StreamChunk]:
    """The deltas of the message's last stream (a call re-run after a crash streams anew), as
    stored by an older run; else one chunk per block of the answer."""
    updates = frames.updates.get(message_id, [])
    if not updates:
        return _block_chunks(message)
    last = updates[-1].get("stream_id")
    return [
        StreamChunk(kind=u["kind"], delta=u["delta"]) for u in updates if u.get("stream_id") == last
    ]


def _block_chunks(message: AssistantMessage) -> list[StreamChunk]:
    chunks: list[StreamChunk] = []
    for block in message.content:
        if isinstance(block, TextBlock) and block.text:
            chunks.append(StreamChunk(kind="text", delta=block.text))
        elif isinstance(block, ThinkingBlock) and block.text:
            chunks.append(StreamChunk(kind="thinking", delta=block.text))
        elif isinstance(block, FunctionCallBlock):
            delta = json.dumps(block.arguments, ensure_ascii=False, separators=(",", ":"))
            chunks.append(StreamChunk(kind="function_call", delta=delta))
    return chunks


_Call = tuple[str, str | None, dict[str, Any]]


async def _tool_exchange(
    bus: Caller,
    record: TurnRecord,
    entry: CassetteEntry,
    frames: _Frames,
    calls: dict[str, _Call],
) -> ToolExchange | None:
    result = entry.message
    if not isinstance(result, FunctionResultMessage):
        return None
    call_id = result.function_call_id
    call = calls.get(call_id, ("", result.function_id, {}))
    ledger = await _state(bus, LEDGER_SCOPE, f"{record.session_id}/{record.run_id}/{call_id}")
    duration = ledger.get("duration_ms") if isinstance(ledger, dict) else None
    gate = frames.by_call.get(("gate_decision", call_id))
    approval = frames.by_call.get(("approval_resolved", call_id))
    return ToolExchange(
        call_id=call_id,
        tool_name=call[0],
        function_id=call[1],
        arguments=call[2],
        result=result,
        ran=isinstance(ledger, dict),
        duration_ms=duration if isinstance(duration, (int, float)) else None,
        gate=None if gate is None else GateRecord.model_validate(gate),
        approval=None if approval is None else ApprovalRecord.model_validate(approval),
    )


def _call_blocks(record: TurnRecord, own: list[CassetteEntry]) -> dict[str, _Call]:
    """Each call of the run's assistant messages: (tool name, function id, arguments)."""
    calls: dict[str, _Call] = {}
    for entry in own:
        if isinstance(entry.message, AssistantMessage):
            for block in entry.message.function_calls():
                tool = record.tool(block.tool_name)
                function_id = None if tool is None else tool.function_id
                calls[block.id] = (block.tool_name, function_id, block.arguments)
    return calls


_NOT_KEPT = frozenset(
    {
        "function_call_id",
        "function_id",
        "matched_constraint",
        "arguments",
        # who approved, verified: the audit keeps it; a replay needs the decision only
        "approver_principal",
        "approvals_so_far",
        "needed",
    }
)


def _budget(frames: list[dict[str, Any]]) -> list[BudgetRecord]:
    decisions: list[BudgetRecord] = []
    for frame in frames:
        data = frame.get("data", {})
        parts = str(frame.get("event_id", "")).split(":")
        turn = parts[-2].lstrip("t") if len(parts) > 1 else ""
        decisions.append(
            BudgetRecord(
                turn=int(turn) if turn.isdigit() else len(decisions) + 1,
                allowed=bool(data.get("allowed")),
                estimate_usd=float(data.get("estimate_usd") or 0.0),
                reason=data.get("reason"),
            )
        )
    return decisions
