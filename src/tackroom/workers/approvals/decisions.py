"""The calls' records: pending calls read, decisions written **create-only** and announced.

A decision is written once (``expected_revision=0``), so two decisions arriving at once produce
one write — one wake of the parked turn — and the pending record is deleted after it. Then
``approval_resolved`` goes on ``agent::events`` (and with it the audit fact of the decision).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Protocol

from tackroom.contracts import approvals as c
from tackroom.contracts.events import ApprovalResolvedData
from tackroom.contracts.principal import Principal
from tackroom.engine.errors import EngineError, RevisionConflict
from tackroom.engine.protocol import Appender, StateBackend, Transactions
from tackroom.kit.events import EventEmitter
from tackroom.workers.approvals.records import parse
from tackroom.workers.approvals.settings import Clock

__all__ = ["ApprovalsBackend", "Decisions", "record_of"]

_log = logging.getLogger("tackroom.approvals")


class ApprovalsBackend(StateBackend, Appender, Transactions, Protocol):
    """The engine's parts the worker uses (an ``Engine`` is one)."""


def record_of(
    pending: c.PendingApproval,
    decision: c.Decision,
    reason: str | None,
    approver: str,
    *,
    principal: Principal | None,
    at: float,
) -> c.DecisionRecord:
    """The decision of ``pending``; ``status: pending`` for an allow short of its quorum."""
    rules = pending.approvers
    short = rules is not None and decision == "allow" and len(pending.votes) < rules.quorum
    return c.DecisionRecord(
        decision=decision,
        reason=reason,
        approver=approver,
        decided_at=at,
        session_id=pending.session_id,
        function_call_id=pending.function_call_id,
        function_id=pending.function_id,
        arguments=pending.arguments,
        run_id=pending.run_id,
        requested_at=pending.requested_at,
        approver_principal=principal,
        requester=pending.requester,
        approvers=rules,
        votes=pending.votes,
        status="pending" if short else "decided",
        approvals_so_far=None if rules is None else len(pending.votes),
        needed=None if rules is None else rules.quorum,
    )


class Decisions:
    def __init__(self, engine: ApprovalsBackend, *, clock: Clock) -> None:
        self._engine = engine
        self._events = EventEmitter(engine)
        self._clock = clock

    async def pending(self, key: str) -> c.PendingApproval | None:
        entry = await self._engine.get_state(c.PENDING_SCOPE.name, key)
        return None if entry is None else parse(c.PendingApproval, entry.value, key)

    async def decision(self, key: str) -> c.DecisionRecord | None:
        entry = await self._engine.get_state(c.DECISIONS_SCOPE.name, key)
        if entry is None:
            return None
        record = parse(c.DecisionRecord, entry.value, key)
        # A decision is there even if we cannot read it: never treat the call as undecided.
        return record or c.DecisionRecord(decision="deny", reason="unreadable decision record")

    async def drop_pending(self, key: str, revision: int) -> None:
        # A conflict means it was rewritten meanwhile: the next sweep looks again.
        with contextlib.suppress(RevisionConflict):
            await self._engine.delete_state(c.PENDING_SCOPE.name, key, expected_revision=revision)

    async def decide(
        self,
        pending: c.PendingApproval,
        decision: c.Decision,
        reason: str | None,
        approver: str,
        *,
        principal: Principal | None = None,
    ) -> c.DecisionRecord | None:
        """Write the decision create-only; ``None`` when another decision was there first."""
        key = c.call_key(pending.session_id, pending.function_call_id)
        record = record_of(
            pending, decision, reason, approver, principal=principal, at=self._clock()
        )
        try:
            await self._engine.set_state(
                c.DECISIONS_SCOPE.name, key, record.model_dump(mode="json"), expected_revision=0
            )
        except RevisionConflict:
            return None
        await self._engine.delete_state(c.PENDING_SCOPE.name, key)
        await self._emit_resolved(record)
        return record

    async def _emit_resolved(self, record: c.DecisionRecord) -> None:
        """``approval_resolved`` on the events stream (group = session); needs the run id.

        The decision is already committed: an event that cannot be appended is logged, not
        raised (the decision record, not the event, is the source of truth).
        """
        if not record.run_id or not record.session_id:
            return
        if record.function_call_id is None or record.function_id is None:
            return
        data = ApprovalResolvedData(
            function_call_id=record.function_call_id,
            function_id=record.function_id,
            decision=record.decision,
            reason=record.reason,
            approver=record.approver,
            decided_at=record.decided_at,
            approver_principal=record.approver_principal,
            approvals_so_far=record.approvals_so_far,
            needed=record.needed,
        )
        try:
            await self._events.emit_data(
                session_id=record.session_id,
                run_id=record.run_id,
                key=("approval", record.function_call_id),
                data=data,
            )
        except EngineError:
            _log.exception("approval_resolved for %s was not appended", record.function_call_id)
