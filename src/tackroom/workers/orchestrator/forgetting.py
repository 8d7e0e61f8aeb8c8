"""What the orchestrator forgets of a deleted session: its turn record, finished runs kept for
replay, call ledger, abort request, its subagents' outcomes, the parts of its model calls' prompts
and its ``agent::events`` / ``agent::turn_end`` groups."""

from __future__ import annotations

from typing import Any

from tackroom.contracts.agents import OUTCOMES_SCOPE
from tackroom.contracts.events import EVENTS, TURN_END
from tackroom.contracts.modelprompts import PROMPTS_SCOPE
from tackroom.kit.forgetting import delete_keys
from tackroom.runtime.worker import WorkerContext
from tackroom.workers.orchestrator.aborts import ABORT_SCOPE
from tackroom.workers.orchestrator.dispatch import LEDGER_SCOPE
from tackroom.workers.orchestrator.record import RUNS_SCOPE, TURNS_SCOPE

__all__ = ["forget_session"]


async def forget_session(ctx: WorkerContext[Any], session_id: str) -> dict[str, int]:
    engine = ctx.engine
    own = f"{session_id}/"  # session ids hold no "/", so the prefix is this session's alone
    return {
        "turns": int(await engine.delete_state(TURNS_SCOPE, session_id)),
        "turn_runs": await delete_keys(ctx, RUNS_SCOPE, prefix=own),
        "ledger": await delete_keys(ctx, LEDGER_SCOPE, prefix=own),
        "abort": int(await engine.delete_state(ABORT_SCOPE, session_id)),
        "events": await engine.delete_group(EVENTS.name, session_id),
        "turn_end": await engine.delete_group(TURN_END.name, session_id),
        "subagent_outcomes": await delete_keys(ctx, OUTCOMES_SCOPE, prefix=own),
        "model_prompts": await delete_keys(ctx, PROMPTS_SCOPE.name, prefix=own),
    }
