"""Deciding a parked call: through the approvals worker when it holds the call, else directly.

The approvals worker's ``RESOLVE`` is used when it knows the call (pending or already
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
from tackroom.contracts.principal import Principal
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
    principal: Principal | None = None,
    always: bool = False,
) -> None:
    """Record ``decision`` for a parked call; ``always`` also allows ``function_id`` for the
    rest of the session (approvals worker only). ``principal`` is who decides, as this process
    knows it (its own): the approvals worker checks it against the call's approver rules."""
    approver = approver or (principal.id if principal is not None else user_name())
    try:
        known = await approvals.GET.call(
            bus, approvals.GetRequest(session_id=session_id, function_call_id=function_call_id)
        )
    except FunctionNotFound:
        known = None
    if known is not None and (known.pending is not None or known.decision is not None):
        if always:
            await approvals.ALLOW_FOR_SESSION.call(
                bus,
                approvals.AllowForSessionRequest(session_id=session_id, function_id=function_id),
            )
        await approvals.RESOLVE.call(
            bus,
            approvals.ResolveRequest(
                session_id=session_id,
                function_call_id=function_call_id,
                decision=decision,
                approver=approver,
                reason=reason,
                principal=principal,
            ),
        )
        return
    record = approvals.DecisionRecord(
        decision=decision, approver=approver, reason=reason, decided_at=time.time()
    )
    scope = approvals.DECISIONS_SCOPE
    try:
        await bus.set_state(
            scope.name,
            approvals.call_key(session_id, function_call_id),
            scope.dump_value(record),
            expected_revision=0,
        )
    except RevisionConflict:
        raise AlreadyDecided(f"call {function_call_id} was already decided") from None


def user_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "tackroom"
