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

import asyncio
import random
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tackroom.contracts.budget import SCHEMA_VERSION, Budget, Lead, Period, PeriodUsage
from tackroom.contracts.budget_scopes import chain_of
from tackroom.contracts.versions import upgrading
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import StateEntry

__all__ = [
    "BUDGETS_SCOPE",
    "DELETE",
    "EPSILON",
    "INDEX_SCOPE",
    "RESERVATIONS_SCOPE",
    "SCHEMA_VERSION",
    "SETTLED_KEPT",
    "UNCHANGED",
    "USAGE_SCOPE",
    "Budget",
    "Hold",
    "IndexRecord",
    "Period",
    "PeriodUsage",
    "Reservation",
    "StateBackend",
    "Usage",
    "money",
    "mutate",
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
        return chain_of(
            session_id=self.session_id,
            agent=self.agent,
            workspace=self.workspace,
            tenant=self.tenant,
            user=self.user,
            leads=self.leads,
        )


class IndexRecord(_Model):
    schema_version: int = SCHEMA_VERSION
    budget_ids: list[str] = Field(default_factory=list)


class StateBackend(Protocol):
    """The engine's state methods the worker uses (an ``Engine`` is one)."""

    async def get_state(self, scope: str, key: str) -> StateEntry | None: ...

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry: ...

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool: ...

    async def list_state(self, scope: str, *, prefix: str = "") -> list[StateEntry]: ...


UNCHANGED: Any = object()
"""A change that returns this as its new value writes nothing."""
DELETE: Any = object()
"""A change that returns this as its new value deletes the key."""


async def _backoff(attempt: int) -> None:
    await asyncio.sleep(random.uniform(0, min(0.05, 0.0005 * 2**attempt)) if attempt else 0)


async def mutate(
    backend: StateBackend,
    scope: str,
    key: str,
    change: Callable[[Any], tuple[Any, T]],
    *,
    max_attempts: int,
) -> T:
    """Read, ``change(value or None) -> (new value, result)``, write by compare-and-set; repeat
    on a lost race. ``change`` may raise to abort; it must not have side effects (it may run
    several times)."""
    for attempt in range(max_attempts):
        await _backoff(attempt)
        entry = await backend.get_state(scope, key)
        new, result = change(None if entry is None else entry.value)
        if new is UNCHANGED:
            return result
        revision = 0 if entry is None else entry.revision
        try:
            if new is DELETE:
                if entry is not None and not await backend.delete_state(
                    scope, key, expected_revision=revision
                ):
                    continue
            else:
                await backend.set_state(scope, key, new, expected_revision=revision)
        except RevisionConflict:
            continue
        return result
    raise FunctionError("contention", f"{scope}/{key} kept changing; nothing was written")
