"""Running a batch of function calls: the gate (:mod:`.gate`), the per-call ledger, dispatch.

Every pending call passes the gate; calls a human approved skip it.

The ledger (scope ``turn-ledger``, key ``<session>/<run>/<call>``) is written ``started`` before a
call runs and ``done`` with its result after, so after a crash a done call is not run again, a
started call of an idempotent function is retried, and a started call of any other function is
reported to the model as "outcome unknown" — never silently repeated.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from tackroom.contracts.messages import FunctionResultMessage, TextBlock
from tackroom.contracts.provenance import Label
from tackroom.contracts.tools import TRANSIENT_ERROR_CODES
from tackroom.engine.errors import (
    EngineUnavailable,
    FunctionNotFound,
    InvalidPayload,
    InvocationError,
    InvocationTimeout,
    RevisionConflict,
)
from tackroom.engine.jsonvalue import MAX_CONTENT_DEPTH, MAX_VALUE_BYTES, to_json_value
from tackroom.engine.protocol import Engine, StateEntry
from tackroom.kit.genai import tool_call_span
from tackroom.workers.orchestrator.callevents import Emit, emit_call_end, emit_call_start
from tackroom.workers.orchestrator.flow import FlowIndex, result_label, returned_label
from tackroom.workers.orchestrator.gate import Gate, denial
from tackroom.workers.orchestrator.planning import error_result
from tackroom.workers.orchestrator.record import CallState, ToolOffer, TurnRecord
from tackroom.workers.orchestrator.subagents import Subagents
from tackroom.workers.orchestrator.transition import CallsSettled

__all__ = ["LEDGER_SCOPE", "Dispatcher", "Emit"]

LEDGER_SCOPE = "turn-ledger"
MAX_RESULT_BYTES = MAX_VALUE_BYTES // 4
"""A call's result as JSON, at most: the turn record holds every result of a batch, and one
stored value may take ``MAX_VALUE_BYTES``."""
_WRITE_RETRIES = (0.05, 0.25, None)
"""Pauses between the attempts of a ledger write the engine failed (``None``: give up)."""
TOOL_RETRY_PAUSES = (0.2, 1.0, 5.0)
"""Pauses before the second, third and fourth attempt of an idempotent tool's call that failed
with a transient error (a code in ``TRANSIENT_ERROR_CODES``, or a timeout), as many as the
orchestrator's ``tool_retries`` (default 1, seed 003); other calls run once."""


class Dispatcher:
    def __init__(
        self,
        engine: Engine,
        *,
        gate: Gate,
        call_timeout: float,
        subagents: Subagents,
        flows: FlowIndex,
        tool_retries: int = 1,
    ) -> None:
        self._engine = engine
        self.gate = gate
        self._flows = flows
        self._call_timeout = call_timeout
        self._pauses = TOOL_RETRY_PAUSES[:tool_retries]
        self._subagents = subagents

    async def run_batch(self, record: TurnRecord, emit: Emit) -> CallsSettled:
        """Gate and run every open call; parallel-safe ones together, the rest in order. Each
        call is decided and run knowing what the context the model asked from held."""
        results: dict[str, FunctionResultMessage] = {}
        parked: dict[str, str] = {}
        runnable: list[tuple[CallState, ToolOffer, StateEntry | None]] = []
        open_calls = [call for call in record.calls if call.status in ("pending", "approved")]
        flow = await self._flows.context(record.session_id) if open_calls else None
        label = None if flow is None else flow.label
        external = 0
        for call in open_calls:
            tool = record.tool(call.tool_name)
            if tool is None:
                results[call.id] = error_result(call, f"tool {call.tool_name!r} is not offered")
                continue
            ledger = await self._engine.get_state(LEDGER_SCOPE, _ledger_key(record, call))
            # A call in the ledger passed the gate before a crash: it is not decided again.
            if call.status == "pending" and ledger is None:
                decision = await self.gate.check(
                    record, call, emit, flow=flow, external_allowed=external
                )
                if decision.decision == "deny":
                    results[call.id] = denial(call, decision)
                    continue
                if decision.decision == "needs_approval":
                    parked[call.id] = decision.reason or "needs approval"
                    continue
            runnable.append((call, tool, ledger))
            external += tool.traits.effect == "external"
        children = [(call, tool) for call, tool, _ in runnable if tool.traits.subagent]
        runnable = [item for item in runnable if not item[1].traits.subagent]
        waiting = await self._subagents.start_all(
            record, children, emit, results, context_label=label
        )

        async def run(call: CallState, tool: ToolOffer, ledger: StateEntry | None) -> None:
            results[call.id] = await self._run_once(record, call, tool, ledger, emit, label)

        parallel = [item for item in runnable if item[1].traits.parallel]
        if parallel:
            async with asyncio.TaskGroup() as group:
                for item in parallel:
                    group.create_task(run(*item))
        for item in runnable:
            if not item[1].traits.parallel:
                await run(*item)
        return CallsSettled(results=results, parked=parked, waiting=waiting)

    async def _run_once(
        self,
        record: TurnRecord,
        call: CallState,
        tool: ToolOffer,
        entry: StateEntry | None,
        emit: Emit,
        label: Label | None,
    ) -> FunctionResultMessage:
        key = _ledger_key(record, call)
        if entry is None:
            if await self._claim(key, lambda: emit_call_start(emit, call)):
                return await self._invoke_and_record(record, call, tool, key, emit, label)
            entry = await self._engine.get_state(LEDGER_SCOPE, key)
        assert entry is not None
        if entry.value.get("status") == "done":
            # Settled before a crash: answer from the ledger, and end the call for a client that
            # saw it start (the same event id, if the end was already emitted).
            done = FunctionResultMessage.model_validate(entry.value["result"])
            await emit_call_end(emit, call, done, duration_ms=entry.value.get("duration_ms"))
            return done
        if tool.traits.idempotent:
            await emit_call_start(emit, call)
            return await self._invoke_and_record(record, call, tool, key, emit, label)
        unknown = error_result(
            call,
            f"The outcome of this call is unknown: {tool.function_id} started but the harness"
            " stopped before it reported. It is not idempotent, so it was not run again; check"
            " its effects before retrying.",
            details={"error": "outcome_unknown"},
        )
        await self._record_done(
            key,
            {"status": "done", "result": unknown.model_dump(mode="json")},
            lambda: emit_call_end(emit, call, unknown),
        )
        return unknown

    async def _claim(self, key: str, announce: Callable[[], Awaitable[None]]) -> bool:
        """Announce the call, then write it ``started``; whether this attempt did (so it may run
        the call). Announced before the ledger entry: a failure leaves nothing started.

        Where units of work are atomic the two are one unit, retried whole; elsewhere the
        announcement is made once and the ledger write retried. A write whose acknowledgement
        was lost is read back by its token: a call must not be reported "outcome unknown" when
        it never ran.
        """
        engine = self._engine
        token = uuid.uuid4().hex
        started = {"status": "started", "token": token}

        async def claim() -> None:
            await engine.set_state(LEDGER_SCOPE, key, started, expected_revision=0)

        async def unit() -> None:
            async with engine.transaction():
                await announce()
                await claim()

        try:
            if engine.atomic_transactions:
                await _retrying_write(unit)
            else:
                await announce()
                await _retrying_write(claim)
            return True
        except RevisionConflict:
            entry = await engine.get_state(LEDGER_SCOPE, key)
            return entry is not None and entry.value.get("token") == token

    async def _invoke_and_record(
        self,
        record: TurnRecord,
        call: CallState,
        tool: ToolOffer,
        key: str,
        emit: Emit,
        label: Label | None,
    ) -> FunctionResultMessage:
        started = time.perf_counter()
        with tool_call_span(
            name=call.tool_name,
            call_id=call.id,
            function_id=tool.function_id,
            arguments=call.arguments,
            session_id=record.session_id,
        ) as span:
            result = await self._invoke(record, call, tool, label)
            span.finished(result)
        # Hooks transform before the ledger stores the result: a redacted value is never kept;
        # nor can a hook drop the label the result came with.
        labelled = result.label
        result = await self.gate.after_call(record, call, result)
        result = _keepable(call, tool, result)
        result.label = result_label(tool.function_id, tool.traits, labelled, result.label)
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        done = {
            "status": "done",
            "result": result.model_dump(mode="json"),
            "duration_ms": duration_ms,
        }
        await self._record_done(
            key, done, lambda: emit_call_end(emit, call, result, duration_ms=duration_ms)
        )
        return result

    async def _record_done(
        self, key: str, done: dict[str, Any], announce: Callable[[], Awaitable[None]]
    ) -> None:
        """The ledger's ``done``, then the call's end. The call ran: its result is worth a short
        wait for the engine to come back. Where units of work are atomic the two are one unit,
        retried whole (a failed one wrote nothing); elsewhere only the ledger write is retried."""
        engine = self._engine
        if not engine.atomic_transactions:
            await _retrying_write(lambda: engine.set_state(LEDGER_SCOPE, key, done))
            await announce()
            return

        async def unit() -> None:
            async with engine.transaction():
                await engine.set_state(LEDGER_SCOPE, key, done)
                await announce()

        await _retrying_write(unit)

    async def _invoke(
        self, record: TurnRecord, call: CallState, tool: ToolOffer, label: Label | None
    ) -> FunctionResultMessage:
        payload = record.call_payload(call, context_label=label)
        pauses = self._pauses if tool.traits.idempotent else ()
        attempt = 1
        limit = call_limit(tool.traits.timeout, self._call_timeout, record.tool_timeout)
        result, transient = await self._attempt(call, tool, payload, attempt, limit)
        while transient and attempt <= len(pauses):
            await asyncio.sleep(pauses[attempt - 1])
            attempt += 1
            result, transient = await self._attempt(call, tool, payload, attempt, limit)
        return result

    async def _attempt(
        self,
        call: CallState,
        tool: ToolOffer,
        payload: dict[str, Any],
        attempt: int,
        limit: float,
    ) -> tuple[FunctionResultMessage, bool]:
        """One try of the call: its result, and whether it failed in a way worth another try."""
        try:
            value = await self._engine.trigger(tool.function_id, payload, timeout=limit)
        except FunctionNotFound as exc:
            return error_result(call, str(exc), details={"error": "function_not_found"}), False
        except InvocationTimeout as exc:
            details = _failure("timeout", attempt)
            return error_result(call, str(exc), details=details), True
        except InvocationError as exc:
            message = f"{tool.function_id} failed [{exc.remote_code}]: {exc.message}"
            transient = exc.remote_code in TRANSIENT_ERROR_CODES
            return error_result(
                call, message, details=_failure(exc.remote_code, attempt)
            ), transient
        value, returned = returned_label(value)
        result = _as_result(call, tool, value)
        result.label = result_label(tool.function_id, tool.traits, returned, result.label)
        return result, False


def call_limit(own: float | None, default: float, run: float | None) -> float:
    """Seconds one call may take: the tool's own limit, else the orchestrator's, and never more
    than the run's (an ``AgentConfig``'s ``tool_timeout_seconds``)."""
    limit = own or default
    return limit if run is None else min(limit, run)


def _failure(code: str, attempt: int) -> dict[str, Any]:
    """A failed call's ``details``; ``attempts`` when it was tried more than once."""
    return {"error": code} if attempt == 1 else {"error": code, "attempts": attempt}


async def _retrying_write(write: Callable[[], Awaitable[object]]) -> None:
    """``write()``, again after a short pause while the engine is unavailable (then raise)."""
    for pause in _WRITE_RETRIES:
        try:
            await write()
            return
        except EngineUnavailable:
            if pause is None:
                raise
            await asyncio.sleep(pause)


def _ledger_key(record: TurnRecord, call: CallState) -> str:
    return f"{record.session_id}/{record.run_id}/{call.id}"


def _keepable(
    call: CallState, tool: ToolOffer, result: FunctionResultMessage
) -> FunctionResultMessage:
    """``result``, or an error result saying why the turn cannot keep it: the ledger, the turn
    record and the session all store it, so it may nest ``MAX_CONTENT_DEPTH`` levels and take
    ``MAX_RESULT_BYTES``. The model reads the reason and can ask for less."""
    what = f"the result of {tool.function_id}"
    try:
        data = to_json_value(result.model_dump(mode="json"), what=what, max_depth=MAX_CONTENT_DEPTH)
    except InvalidPayload as exc:
        return error_result(call, exc.message, details={"error": "result_not_kept"})
    size = len(json.dumps(data, ensure_ascii=False).encode())
    if size <= MAX_RESULT_BYTES:
        return result
    return error_result(
        call,
        f"{what} is {size} bytes, more than the {MAX_RESULT_BYTES} a result may have",
        details={"error": "result_not_kept"},
    )


def _as_result(call: CallState, tool: ToolOffer, value: Any) -> FunctionResultMessage:
    """A function's return value as the result the model reads.

    A value shaped like a result (``{"content": [...], ...}``) passes through, with its
    ``timestamp`` when it has one (a replay hands back the recorded clock); anything else is
    shown to the model as JSON text and kept whole in ``details``.
    """
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        stamp = value.get("timestamp")
        when = {"timestamp": stamp} if isinstance(stamp, (int, float)) else {}
        try:
            return FunctionResultMessage(
                function_call_id=call.id,
                function_id=tool.function_id,
                content=value["content"],
                is_error=bool(value.get("is_error", False)),
                details=value.get("details"),
                label=value.get("label"),
                **when,
            )
        except ValidationError:
            pass
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return FunctionResultMessage(
        function_call_id=call.id,
        function_id=tool.function_id,
        content=[TextBlock(text=text)],
        details=value,
    )
