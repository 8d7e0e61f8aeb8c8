"""Waking a run: a ``turn::step`` of its session on the turn-step queue, grouped by session so
that one delivery at a time drives it."""

from __future__ import annotations

from collections.abc import Mapping

from tackroom.contracts.turn import TURN_STEP, TURN_STEP_QUEUE
from tackroom.engine.protocol import Engine
from tackroom.engine.trace_context import in_trace

__all__ = ["wake"]


async def wake(
    engine: Engine, session_id: str, run_id: str, *, trace: Mapping[str, str] | None = None
) -> None:
    """``trace``: the run's own trace context (its record's ``trace_context``), so the steps this
    wakes join the run's trace whoever wakes it (an approver, an abort, a restart)."""
    with in_trace(trace):
        await engine.enqueue(
            TURN_STEP,
            {"session_id": session_id, "run_id": run_id},
            queue=TURN_STEP_QUEUE,
            group=session_id,
        )
