"""The public face of the ``budget`` worker (``budget::*``): ids, payload models, codes.

Budgets cap LLM spend per scope — ``workspace/<id>``, ``agent/<id>``, ``session/<id>``,
``tenant/<tenant>``, ``user/<tenant>~<user>``, optionally limited to one tenant and/or user
(:mod:`tackroom.contracts.budget_scopes`) — per period (``day``, ``week``, ``month`` on UTC
boundaries, or ``total``). A model call is charged to every budget on its chain, a subagent's
call to its leads' budgets too. ``budget::check`` reserves the call's estimate on every enforced
budget of the chain (all or nothing), ``budget::record`` settles the actual cost. Failures arrive
as ``InvocationError`` whose ``remote_code`` is one of the ``*_ERROR`` codes below (or
``invalid_request``, with pydantic's reason).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts._base import Strict as _Stored
from tackroom.contracts.budget_periods import Period, period_bounds, period_key
from tackroom.contracts.budget_scopes import (
    ChainFields,
    ChainId,
    Lead,
    ScopeName,
    TenantName,
    UserName,
    applies,
    resolve_scope,
)
from tackroom.contracts.bus import Function
from tackroom.contracts.versions import upgrading

__all__ = [
    "ALERT_QUEUE",
    "ALERT_SET",
    "BUDGET_EXISTS_ERROR",
    "BUDGET_NOT_FOUND_ERROR",
    "BUDGET_SCHEMA_VERSION",
    "CHECK",
    "CONTENTION_ERROR",
    "CREATE",
    "DELETE",
    "ENFORCE",
    "EXCEEDED",
    "EXEMPT",
    "FORECAST",
    "GET",
    "LIST",
    "PAUSE",
    "PAUSED",
    "RECORD",
    "RESET",
    "SCHEMA_VERSION",
    "SWEEP",
    "UPDATE",
    "USAGE",
    "AlertEvent",
    "AlertSetRequest",
    "Budget",
    "BudgetId",
    "BudgetList",
    "BudgetRef",
    "ChainFields",
    "Charge",
    "CheckRequest",
    "CheckResponse",
    "CreateRequest",
    "Deleted",
    "EnforceRequest",
    "ExemptRequest",
    "Forecast",
    "Lead",
    "ListRequest",
    "PauseRequest",
    "Period",
    "PeriodUsage",
    "RecordRequest",
    "RecordResponse",
    "ScopeName",
    "SweepRequest",
    "SweepResponse",
    "UpdateRequest",
    "UsageRequest",
    "UsageResponse",
    "period_bounds",
    "period_key",
]

SCHEMA_VERSION = 1
BUDGET_SCHEMA_VERSION = 2
"""Version 2 of a budget added ``tenant`` and ``user`` (and the ``tenant/``, ``user/`` scopes);
a version 1 budget reads as one for every tenant."""


class Budget(_Stored):
    schema_version: int = BUDGET_SCHEMA_VERSION
    id: str
    scope: str = Field(
        description="workspace/<id>, agent/<id>, session/<id>, tenant/<t> or user/<t>~<user>"
    )
    tenant: str | None = Field(default=None, description="counts only this tenant's calls")
    user: str | None = Field(default=None, description="counts only this user's calls")
    period: Period
    cap_usd: float
    alert_thresholds: list[float] = Field(description="fractions of the cap, e.g. 0.8")
    alert_function: str | None = None
    exempt: bool = Field(default=False, description="checks skip it (spend is still recorded)")
    exempt_until: float | None = None
    paused: bool = Field(default=False, description="every check on its chain is denied")
    enforce: bool = Field(default=True, description="false: tracked and alerted, never denies")
    name: str | None = None
    created_at: float
    updated_at: float

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        return upgrading(data, BUDGET_SCHEMA_VERSION) or data

    def exempt_at(self, now: float) -> bool:
        return self.exempt and (self.exempt_until is None or now < self.exempt_until)

    def applies_to(self, tenant: str | None, user: str | None) -> bool:
        """Whether a call of ``tenant``'s ``user`` counts on this budget (its scope aside)."""
        return applies(self.tenant, self.user, tenant=tenant, user=user)


class PeriodUsage(_Stored):
    """The public view of one period's usage."""

    period_key: str
    spent_usd: float
    reserved_usd: float
    records_count: int
    fired_thresholds: list[float]
    reset_count: int = 0


ALERT_QUEUE = "budget-alerts"
"""Alerts are enqueued here, to each budget's ``alert_function``, with an :class:`AlertEvent`."""

BUDGET_NOT_FOUND_ERROR = "budget_not_found"
BUDGET_EXISTS_ERROR = "budget_exists"
CONTENTION_ERROR = "contention"
"""A write lost its compare-and-set too many times in a row; safe to retry."""

EXCEEDED = "budget_exceeded"
"""``check`` denial: the estimate does not fit under a cap (the turn stops: budget_exceeded)."""
PAUSED = "budget_paused"
"""``check`` denial: a budget on the chain is paused."""

BudgetId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{1,100}$")]
Thresholds = Annotated[list[Annotated[float, Field(gt=0, le=100)]], Field(max_length=16)]


class BudgetRef(_Model):
    budget_id: BudgetId


class CreateRequest(_Model):
    """A budget's scope is ``scope``, else ``agent/<agent>``, else the user's, else the
    tenant's; ``tenant`` and ``user`` beside another scope limit the budget to their calls."""

    id: BudgetId | None = Field(default=None, description="default: a fresh id")
    scope: ScopeName | None = Field(default=None, description="default: from agent, user, tenant")
    agent: ChainId | None = Field(default=None, description="scope agent/<agent>")
    tenant: TenantName | None = Field(default=None, description="only this tenant's calls")
    user: UserName | None = Field(default=None, description="only this user's calls")
    period: Period = "month"
    cap_usd: float = Field(gt=0)
    alert_thresholds: Thresholds = Field(default_factory=lambda: [0.5, 0.8, 1.0])
    alert_function: str | None = None
    enforce: bool = True
    name: str | None = None

    @model_validator(mode="after")
    def _scoped(self) -> Self:
        self.scope, self.tenant, self.user = resolve_scope(
            self.scope, agent=self.agent, tenant=self.tenant, user=self.user
        )
        return self


class ListRequest(_Model):
    scope: str | None = Field(default=None, description="a scope, or a prefix like 'agent/'")
    tenant: TenantName | None = Field(default=None, description="only budgets of this tenant")


class BudgetList(_Model):
    schema_version: int = SCHEMA_VERSION
    budgets: list[Budget]


class UpdateRequest(BudgetRef):
    cap_usd: float | None = Field(default=None, gt=0)
    period: Period | None = None
    name: str | None = None


class Deleted(_Model):
    schema_version: int = SCHEMA_VERSION
    deleted: bool


class AlertSetRequest(BudgetRef):
    thresholds: Thresholds
    function_id: str | None = Field(description="called once per period per threshold; null: off")


class EnforceRequest(BudgetRef):
    enforce: bool = True


class PauseRequest(BudgetRef):
    paused: bool = True


class ExemptRequest(BudgetRef):
    exempt: bool = True
    until: float | None = Field(default=None, description="seconds since the epoch; null: open")


class CheckRequest(ChainFields):
    estimate_usd: float = Field(ge=0)
    ttl_s: float | None = Field(
        default=None, gt=0, le=86_400, description="how long the reservation holds (config)"
    )


class CheckResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    allowed: bool
    reservation_id: str | None = Field(
        default=None, description="pass to record; absent when no enforced budget applies"
    )
    reason: Literal["budget_exceeded", "budget_paused"] | None = None
    budget_id: str | None = Field(default=None, description="the budget that denied")
    detail: str | None = None
    remaining_usd: float | None = Field(
        default=None, description="the least room left under any enforced cap, after this hold"
    )


class RecordRequest(ChainFields):
    """The chain is the reservation's when ``reservation_id`` names one still kept."""

    reservation_id: str | None = None
    record_id: str | None = Field(
        default=None, description="idempotency key when there is no reservation"
    )
    cost_usd: float = Field(ge=0)


class Charge(_Model):
    budget_id: str
    period_key: str
    spent_usd: float
    cap_usd: float
    duplicate: bool = Field(default=False, description="already recorded: nothing added")


class RecordResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    charged: list[Charge]
    alerts: list[float] = Field(default_factory=list, description="thresholds that fired")


class UsageRequest(BudgetRef):
    periods: int = Field(default=12, ge=1, le=1000, description="past periods in history")


class UsageResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    budget_id: str
    period: Period
    cap_usd: float
    current: PeriodUsage
    history: list[PeriodUsage] = Field(description="earlier periods, newest first")


class Forecast(_Model):
    schema_version: int = SCHEMA_VERSION
    budget_id: str
    period_key: str
    period_start: float
    period_end: float | None
    spent_usd: float
    cap_usd: float
    projected_usd: float = Field(description="spend at period end at the rate so far (linear)")
    on_track: bool
    exhausts_at: float | None = Field(description="when the cap is reached at that rate")


class AlertEvent(_Model):
    """What an ``alert_function`` is called with (through queue :data:`ALERT_QUEUE`)."""

    schema_version: int = SCHEMA_VERSION
    budget_id: str
    scope: str
    name: str | None
    period_key: str
    threshold: float
    spent_usd: float
    cap_usd: float


class SweepRequest(BaseModel):
    """Empty when called directly; the cron trigger's ``{schedule, fired_at}`` is ignored."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class SweepResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    deleted: int


# -- the functions ---------------------------------------------------------------------------

CREATE: Function[CreateRequest, Budget] = Function(
    "budget::create",
    CreateRequest,
    Budget,
    description="Create a budget: a cap in USD per period for a workspace, agent, session, "
    "tenant or user.",
)
LIST: Function[ListRequest, BudgetList] = Function(
    "budget::list", ListRequest, BudgetList, description="Budgets, optionally of a scope."
)
GET: Function[BudgetRef, Budget] = Function(
    "budget::get", BudgetRef, Budget, description="One budget."
)
UPDATE: Function[UpdateRequest, Budget] = Function(
    "budget::update", UpdateRequest, Budget, description="Change a budget's cap, period or name."
)
DELETE: Function[BudgetRef, Deleted] = Function(
    "budget::delete", BudgetRef, Deleted, description="Delete a budget and its usage."
)
CHECK: Function[CheckRequest, CheckResponse] = Function(
    "budget::check",
    CheckRequest,
    CheckResponse,
    description="Before a model call: reserve the estimate on every enforced budget of the "
    "chain, or deny (budget_exceeded, budget_paused).",
    hop=True,
)
"""The orchestrator calls it under its configured ``budget_check_function`` id (``.at(id)``)."""
RECORD: Function[RecordRequest, RecordResponse] = Function(
    "budget::record",
    RecordRequest,
    RecordResponse,
    description="After a model call: settle the actual cost (releases the reservation); fires "
    "alerts.",
    hop=True,
)
"""The orchestrator calls it under its configured ``budget_record_function`` id."""
RESET: Function[BudgetRef, PeriodUsage] = Function(
    "budget::reset",
    BudgetRef,
    PeriodUsage,
    description="Zero the current period's spend and alert marks.",
)
ALERT_SET: Function[AlertSetRequest, Budget] = Function(
    "budget::alert_set",
    AlertSetRequest,
    Budget,
    description="Set alert thresholds (fractions of the cap) and the function they call.",
)
USAGE: Function[UsageRequest, UsageResponse] = Function(
    "budget::usage",
    UsageRequest,
    UsageResponse,
    description="Spend and reservations of the current period, and earlier periods.",
)
FORECAST: Function[BudgetRef, Forecast] = Function(
    "budget::forecast",
    BudgetRef,
    Forecast,
    description="Project the period's spend at its rate so far.",
)
ENFORCE: Function[EnforceRequest, Budget] = Function(
    "budget::enforce",
    EnforceRequest,
    Budget,
    description="Enforce a budget (deny over the cap) or only track it.",
)
EXEMPT: Function[ExemptRequest, Budget] = Function(
    "budget::exempt",
    ExemptRequest,
    Budget,
    description="Exempt a budget from checks (spend still recorded), optionally until a time.",
)
PAUSE: Function[PauseRequest, Budget] = Function(
    "budget::pause",
    PauseRequest,
    Budget,
    description="Pause a budget: every check on its chain is denied until unpaused.",
)
SWEEP: Function[SweepRequest, SweepResponse] = Function(
    "budget::sweep",
    SweepRequest,
    SweepResponse,
    description="Internal: delete expired reservation records.",
)
"""Internal (cron): delete reservation records past their expiry."""
