"""The events of one function call, made one way wherever the call is planned, gated, run, parked
or answered by a child run.

Every event of a call names the same function (:func:`function_of`), and a call's start and end
have the ids ``<run_id>:<call_id>:start`` and ``<run_id>:<call_id>:end`` however often the step
that emits them is delivered. A call settled as it was planned (an unknown tool, arguments that
do not validate) ends in the transition's outbox instead, under that step's ids.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tackroom.contracts.events import (
    ApprovalRequestedData,
    EventData,
    FunctionExecutionEndData,
    FunctionExecutionStartData,
)
from tackroom.contracts.messages import FunctionResultMessage
from tackroom.workers.orchestrator.record import CallState

__all__ = [
    "Emit",
    "approval_requested",
    "call_ended",
    "call_started",
    "emit_call_end",
    "emit_call_start",
    "function_of",
]

Emit = Callable[[str, EventData], Awaitable[None]]
"""``emit(event_key, data)``: the event ``<run_id>:<event_key>`` carrying ``data``."""


def function_of(call: CallState) -> str:
    """The function a call's events name: its function id, or the tool name the model used when
    no offered tool has that name."""
    return call.function_id or call.tool_name


def call_started(call: CallState) -> FunctionExecutionStartData:
    return FunctionExecutionStartData(
        function_call_id=call.id, function_id=function_of(call), arguments=call.arguments
    )


def call_ended(
    call: CallState, result: FunctionResultMessage, *, duration_ms: float | None = None
) -> FunctionExecutionEndData:
    return FunctionExecutionEndData(
        function_call_id=call.id,
        function_id=function_of(call),
        result=result,
        is_error=result.is_error,
        duration_ms=duration_ms,
    )


def approval_requested(call: CallState, *, reason: str) -> ApprovalRequestedData:
    return ApprovalRequestedData(
        function_call_id=call.id,
        function_id=function_of(call),
        arguments=call.arguments,
        reason=reason,
    )


async def emit_call_start(emit: Emit, call: CallState) -> None:
    """The ``function_execution_start`` event of a call about to run (or start a child run)."""
    await emit(f"{call.id}:start", call_started(call))


async def emit_call_end(
    emit: Emit, call: CallState, result: FunctionResultMessage, *, duration_ms: float | None = None
) -> None:
    """The ``function_execution_end`` event of a call (run, refused or answered by a child)."""
    await emit(f"{call.id}:end", call_ended(call, result, duration_ms=duration_ms))
