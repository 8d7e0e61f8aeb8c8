"""What the budget worker persists, where, and the compare-and-set loop every write goes through.

Scopes and keys:

- ``budgets`` / ``<budget_id>`` → :class:`Budget`;
- ``budget-index`` / ``<scope>`` (e.g. ``session/s1``) → :class:`IndexRecord`: the budgets of a
  scope, so a check reads only its chain;
- ``budget-usage`` / ``<budget_id>/<period_key>`` → :class:`Usage`: spend, live reservations,
  fired alert thresholds and recently settled ids of one period;
- ``budget-reservations`` / ``<reservation_id>`` → :class:`Reservation`: which budgets and
  periods a check reserved on, so ``record`` settles the same holds.

Every write is compare-and-set on the value's revision (never an in-process lock), so any number
of worker processes share the state safely.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tackroom.contracts.budget import SCHEMA_VERSION, Budget, Lead, Period, PeriodUsage
from tackroom.contracts.budget_scopes import scopes_of
from tackroom.contracts.versions import upgrading

__all__ = [
    "BUDGETS_SCOPE",
    "EPSILON",
    "INDEX_SCOPE",
    "RESERVATIONS_SCOPE",
    "SCHEMA_VERSION",
    "SETTLED_KEPT",
    "USAGE_SCOPE",
    "Budget",
    "Hold",
    "IndexRecord",
    "Period",
    "PeriodUsage",
    "Reservation",
    "Usage",
    "money",
]

BUDGETS_SCOPE = "budgets"
INDEX_SCOPE = "budget-index"
USAGE_SCOPE = "budget-usage"
RESERVATIONS_SCOPE = "budget-reservations"

SETTLED_KEPT = 256
"""Settled ids a usage record remembers, so a redelivered ``record`` is not charged twice."""
EPSILON = 1e-9
"""Dollar amounts are rounded to this (a nano-dollar) and compared with it as tolerance."""

T = TypeVar("T")


def money(amount: float) -> float:
    return round(amount, 9)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hold(_Model):
    amount_usd: float
    expires_at: float


class Usage(_Model):
    schema_version: int = SCHEMA_VERSION
    budget_id: str
    period_key: str
    spent_usd: float = 0.0
    records_count: int = 0
    reservations: dict[str, Hold] = Field(default_factory=dict)
    fired: list[float] = Field(default_factory=list, description="alert thresholds fired")
    settled: list[str] = Field(default_factory=list, description="recent settled ids, oldest 1st")
    reset_count: int = 0
    spent_before_reset_usd: float = 0.0

    def live(self, now: float) -> Usage:
        """This usage without expired reservations (a crashed caller's hold lapses)."""
        held = {rid: h for rid, h in self.reservations.items() if h.expires_at > now}
        if len(held) == len(self.reservations):
            return self
        return self.model_copy(update={"reservations": held})

    def reserved_usd(self) -> float:
        return money(sum(h.amount_usd for h in self.reservations.values()))


class ReservedOn(_Model):
    budget_id: str
    period_key: str
    amount_usd: float


class Reservation(_Model):
    """Version 2 added the chain's ``tenant``, ``user`` and ``leads``; a version 1 reservation
    reads as one with none."""

    schema_version: int = 2
    reservation_id: str
    session_id: str
    agent: str | None = None
    workspace: str | None = None
    tenant: str | None = None
    user: str | None = None
    leads: list[Lead] = Field(default_factory=list)
    holds: list[ReservedOn]
    created_at: float
    expires_at: float
    settled_at: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        return upgrading(data, 2) or data

    def chain(self) -> list[str]:
        return scopes_of(self)


class IndexRecord(_Model):
    schema_version: int = SCHEMA_VERSION
    budget_ids: list[str] = Field(default_factory=list)
