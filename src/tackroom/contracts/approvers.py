"""Who may approve a parked call: the approver rules a policy attaches to ``needs_approval``.

A policy rule that asks may name its approvers (``approvers:`` in ``permissions.yaml``, the
``@approvers_roles``/``@four_eyes``/``@quorum`` annotations in Cedar):

- ``roles``: the approver must hold one of them;
- ``four_eyes``: the principal the run acts for may not approve its own call;
- ``quorum``: that many distinct approvers must allow before the call runs; any deny ends it.

The policy answers them with its check (``CheckResponse.approvers``); the orchestrator's gate hands
them, with the principal the run acts for (the *requester*), to ``approval::request``; the
approvals worker keeps them with the pending call and enforces them on every
``approval::resolve``, against the approver's principal as the caller verified it
(``ResolveRequest.principal``). :func:`refusal` is what they mean, for every approvals worker.

A tenant is a hard boundary: an approver of another tenant than the run's does not see the call
at all (``not_pending``, as for an unknown call id) — :func:`tenant_of_call`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tackroom.contracts.principal import Principal
from tackroom.contracts.tenancy import tenant_of

__all__ = [
    "MAX_QUORUM",
    "ApprovalVote",
    "ApproverRules",
    "person_of",
    "refusal",
    "same_person",
    "tenant_of_call",
]

MAX_QUORUM = 16

Role = Annotated[str, StringConstraints(pattern=r"^[^\s\x00-\x1f\x7f]{1,200}$")]


class ApproverRules(BaseModel):
    """Who may decide a call that needs approval (none of it set: anyone, as without rules)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    schema_version: Literal[1] = 1
    roles: tuple[Role, ...] = Field(
        default=(),
        max_length=64,
        description="the approver must hold one of these roles; empty: any role, or none",
    )
    four_eyes: bool = Field(
        default=False, description="the principal the run acts for may not approve its own call"
    )
    quorum: int = Field(
        default=1,
        ge=1,
        le=MAX_QUORUM,
        description="distinct approvers that must allow before the call runs (any deny ends it)",
    )

    @property
    def restricts(self) -> bool:
        """Does it ask anything of an approver? Rules that do not are as no rules at all."""
        return bool(self.roles) or self.four_eyes or self.quorum > 1

    def describe(self) -> str:
        """One line: ``an approver with the role admin or ops, not the requester, 2 approvals``."""
        parts: list[str] = []
        if self.roles:
            parts.append(f"an approver with the role {' or '.join(self.roles)}")
        if self.four_eyes:
            parts.append("not the principal the run acts for")
        if self.quorum > 1:
            parts.append(f"{self.quorum} distinct approvers")
        return ", ".join(parts) or "any approver"


class ApprovalVote(BaseModel):
    """One approver's allow of a call that needs a quorum, as the approvals worker keeps it."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    schema_version: int = 1
    approver: str = Field(description="the approver's principal id")
    principal: Principal
    decided_at: float
    reason: str | None = None


def person_of(principal: Principal) -> str:
    """Who acted, as ``<tenant>/<user>``: the impersonating user when there is one, so one person
    counts once towards a quorum under any of the principals they may act as."""
    return f"{principal.tenant}/{principal.on_behalf_of or principal.id}"


def same_person(first: Principal, second: Principal) -> bool:
    """Same tenant and a user in common (its id, or the user who acted for it)."""
    if first.tenant != second.tenant:
        return False
    mine = {first.id, first.on_behalf_of} - {None}
    theirs = {second.id, second.on_behalf_of} - {None}
    return bool(mine & theirs)


def tenant_of_call(session_id: str, requester: Principal | None) -> str:
    """The tenant a parked call belongs to: its run's principal's, else its session id's."""
    return requester.tenant if requester is not None else tenant_of(session_id)


def refusal(
    rules: ApproverRules,
    *,
    approver: Principal | None,
    requester: Principal | None,
    decision: str,
) -> str | None:
    """Why ``approver`` may not ``decision`` a call under ``rules`` — one line — or ``None``.

    ``aborted`` (the run ended: the call will not run) is never refused, nor is anything under
    rules that restrict nothing (:attr:`ApproverRules.restricts`). A deny needs the same
    roles as an allow; four-eyes holds for allows only (the requester may always say no). The
    tenant and the quorum are the caller's to check (:func:`tenant_of_call`, :func:`person_of`).
    """
    if decision == "aborted" or not rules.restricts:
        return None
    if approver is None:
        return (
            f"this call needs {rules.describe()}, and the resolve names no verified principal"
            " (pass the approver's principal)"
        )
    if rules.roles and not any(approver.holds(role) for role in rules.roles):
        needed = ", ".join(rules.roles)
        return (
            f"{approver.id!r} may not decide this call: it needs one of the roles {needed}"
            f" (held: {', '.join(approver.roles) or 'none'})"
        )
    if rules.four_eyes and decision == "allow":
        if requester is None:
            return (
                "this call needs four eyes, and its run names no principal to tell apart from"
                " the approver"
            )
        if same_person(approver, requester):
            return (
                f"{approver.id!r} may not approve this call: four eyes — the principal the run"
                " acts for needs another person's approval"
            )
    return None
