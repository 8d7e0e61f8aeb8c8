"""Deciding a parked call: through the approvals worker when it holds the call, else directly.

``approval::resolve`` is used when the approvals worker knows the call (pending or already
decided, so a second decision gets its typed ``already_decided`` error). Without an approvals
worker — or for a call a turn parked without it (a ``requires_approval`` tool in a thin harness)
— the decision is written create-only where the orchestrator reads it, so exactly one decision
ever counts.
"""

from __future__ import annotations

import getpass
import time
from typing import Any, Literal, Protocol

from tackroom.contracts import approvals
from tackroom.contracts.turn import APPROVALS_SCOPE
from tackroom.engine.errors import FunctionNotFound, RevisionConflict

__all__ = ["AlreadyDecided", "Bus", "decide", "user_name"]


class Bus(Protocol):
    async def trigger(
        self, function_id: str, payload: Any = None, *, timeout: float = ...
    ) -> Any: ...

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> Any: ...


class AlreadyDecided(RuntimeError):
    """The call was decided before (by another terminal, a program, an expiry)."""


async def decide(
    bus: Bus,
    *,
    session_id: str,
    function_call_id: str,
    function_id: str,
    decision: Literal["allow", "deny"],
    reason: str | None = None,
    approver: str | None = None,
    always: bool = False,
) -> None:
    """Record ``decision`` for a parked call; ``always`` also allows ``function_id`` for the
    rest of the session (approvals worker only)."""
    approver = approver or user_name()
    key = {"session_id": session_id, "function_call_id": function_call_id}
    try:
        known = await bus.trigger(approvals.GET, key)
    except FunctionNotFound:
        known = None
    if isinstance(known, dict) and (known.get("pending") or known.get("decision")):
        if always:
            await bus.trigger(
                approvals.ALLOW_FOR_SESSION,
                {"session_id": session_id, "function_id": function_id},
            )
        await bus.trigger(
            approvals.RESOLVE,
            {**key, "decision": decision, "approver": approver, "reason": reason},
        )
        return
    record = {
        "decision": decision,
        "approver": approver,
        "reason": reason,
        "decided_at": time.time(),
    }
    try:
        await bus.set_state(
            APPROVALS_SCOPE, f"{session_id}/{function_call_id}", record, expected_revision=0
        )
    except RevisionConflict:
        raise AlreadyDecided(f"call {function_call_id} was already decided") from None


def user_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "tackroom"
