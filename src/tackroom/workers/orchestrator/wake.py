"""Waking a run: a ``turn::step`` of its session on the turn-step queue, grouped by session so
that one delivery at a time drives it."""

from __future__ import annotations

from tackroom.contracts.turn import TURN_STEP, TURN_STEP_QUEUE
from tackroom.engine.protocol import Engine

__all__ = ["wake"]


async def wake(engine: Engine, session_id: str, run_id: str) -> None:
    await engine.enqueue(
        TURN_STEP,
        {"session_id": session_id, "run_id": run_id},
        queue=TURN_STEP_QUEUE,
        group=session_id,
    )
