"""Who may decide a parked call, and the audit facts of what each approver did.

The rules themselves (:func:`tackroom.contracts.approvers.refusal`) are the contract's; here they
meet the worker's records: the tenant check (another tenant's call is not there for the
approver), the quorum's count of distinct approvers, and the facts every partial allow and every
refused resolve leave on ``audit::facts`` (the decision itself is audited through its
``approval_resolved`` event).
"""

from __future__ import annotations

import uuid
from typing import Any

from tackroom.contracts import approvals as c
from tackroom.contracts.approvers import ApprovalVote, person_of, tenant_of_call
from tackroom.contracts.audit import AuditFact
from tackroom.contracts.principal import Principal
from tackroom.engine.protocol import Appender
from tackroom.kit.audit import record_fact

__all__ = [
    "REFUSED_KIND",
    "VOTE_KIND",
    "record_refusal",
    "record_vote",
    "visible_to",
    "with_vote",
]

VOTE_KIND = "approval_vote"
"""An allow counted towards a quorum not yet reached (the call still waits)."""
REFUSED_KIND = "approval_refused"
"""A resolve refused: an approver the call's rules do not allow, or of another tenant."""


def visible_to(
    principal: Principal | None, session_id: str, known: c.PendingApproval | c.DecisionRecord
) -> bool:
    """May ``principal`` see the call at all? Not from another tenant than the run's. A caller
    that names no principal is a local one, trusted as before (approver rules refuse it)."""
    if principal is None:
        return True
    return principal.tenant == tenant_of_call(session_id, known.requester)


def with_vote(
    votes: list[ApprovalVote], principal: Principal, *, at: float, reason: str | None
) -> list[ApprovalVote]:
    """``votes`` with ``principal``'s allow: the same list when that person allowed already."""
    person = person_of(principal)
    if any(person_of(vote.principal) == person for vote in votes):
        return votes
    vote = ApprovalVote(approver=principal.id, principal=principal, decided_at=at, reason=reason)
    return [*votes, vote]


def _who(principal: Principal | None) -> dict[str, Any] | None:
    return None if principal is None else principal.model_dump(mode="json")


async def record_vote(
    engine: Appender, pending: c.PendingApproval, vote: ApprovalVote, *, needed: int
) -> None:
    """A partial allow: who, and how many of how many (once per person and call)."""
    key = c.call_key(pending.session_id, pending.function_call_id)
    fact = AuditFact(
        fact_id=f"approval-vote:{key}:{pending.run_id or '-'}:{person_of(vote.principal)}",
        kind=VOTE_KIND,
        principal=pending.requester,
        actor=vote.approver,
        session_id=pending.session_id,
        run_id=pending.run_id,
        at=vote.decided_at,
        fact={
            "function_call_id": pending.function_call_id,
            "function_id": pending.function_id,
            "decision": "allow",
            "outcome": "counted",
            "approver": _who(vote.principal),
            "approvals_so_far": len(pending.votes),
            "needed": needed,
            "reason": vote.reason,
        },
    )
    await record_fact(engine, fact)


async def record_refusal(
    engine: Appender,
    request: c.ResolveRequest,
    known: c.PendingApproval | c.DecisionRecord,
    *,
    error: str,
    reason: str,
    at: float,
) -> None:
    """A refused resolve: the approver as the caller named it, the decision it asked for, why."""
    principal = request.principal
    fact = AuditFact(
        fact_id=f"approval-refused:{uuid.uuid4().hex}",
        kind=REFUSED_KIND,
        principal=known.requester,
        actor=principal.id if principal is not None else request.approver,
        session_id=request.session_id,
        run_id=known.run_id,
        at=at,
        fact={
            "function_call_id": request.function_call_id,
            "function_id": known.function_id,
            "decision": request.decision,
            "outcome": "refused",
            "error": error,
            "reason": reason,
            "approver": _who(principal),
            "approver_name": request.approver,
        },
    )
    await record_fact(engine, fact)
