"""Reading the ledger: usage by period, a linear forecast, and the sweep of old reservations."""

from __future__ import annotations

from collections.abc import Callable

from tackroom.contracts.budget import Forecast, UsageResponse, period_bounds, period_key
from tackroom.engine.errors import RevisionConflict
from tackroom.kit.cas import StateBackend
from tackroom.workers.budget.ledger import usage_key
from tackroom.workers.budget.records import (
    RESERVATIONS_SCOPE,
    USAGE_SCOPE,
    Budget,
    PeriodUsage,
    Reservation,
    Usage,
    money,
)

__all__ = ["Reports"]


def _view(usage: Usage, now: float) -> PeriodUsage:
    live = usage.live(now)
    return PeriodUsage(
        period_key=usage.period_key,
        spent_usd=usage.spent_usd,
        reserved_usd=live.reserved_usd(),
        records_count=usage.records_count,
        fired_thresholds=usage.fired,
        reset_count=usage.reset_count,
    )


class Reports:
    def __init__(self, backend: StateBackend, *, clock: Callable[[], float]) -> None:
        self._backend = backend
        self._clock = clock

    async def current(self, budget: Budget) -> PeriodUsage:
        now = self._clock()
        key = period_key(budget.period, now)
        entry = await self._backend.get_state(USAGE_SCOPE, usage_key(budget.id, key))
        usage = Usage(budget_id=budget.id, period_key=key)
        if entry is not None:
            usage = Usage.model_validate(entry.value)
        return _view(usage, now)

    async def usage(self, budget: Budget, *, periods: int) -> UsageResponse:
        now = self._clock()
        current_key = period_key(budget.period, now)
        entries = await self._backend.list_state(USAGE_SCOPE, prefix=f"{budget.id}/")
        history = [
            _view(Usage.model_validate(e.value), now)
            for e in sorted(entries, key=lambda e: e.key, reverse=True)
            if e.key != usage_key(budget.id, current_key)
        ]
        return UsageResponse(
            budget_id=budget.id,
            period=budget.period,
            cap_usd=budget.cap_usd,
            current=await self.current(budget),
            history=history[:periods],
        )

    async def forecast(self, budget: Budget) -> Forecast:
        now = self._clock()
        current = await self.current(budget)
        start, end = period_bounds(budget.period, now, origin=budget.created_at)
        spent = current.spent_usd
        elapsed = max(now - start, 1.0)
        rate = spent / elapsed  # dollars per second so far
        projected = spent if end is None else spent + rate * max(end - now, 0.0)
        exhausts_at = None
        if rate > 0 and spent < budget.cap_usd:
            at = now + (budget.cap_usd - spent) / rate
            exhausts_at = at if end is None or at < end else None
        elif spent >= budget.cap_usd:
            exhausts_at = now
        return Forecast(
            budget_id=budget.id,
            period_key=current.period_key,
            period_start=start,
            period_end=end,
            spent_usd=spent,
            cap_usd=budget.cap_usd,
            projected_usd=money(projected),
            on_track=projected <= budget.cap_usd,
            exhausts_at=exhausts_at,
        )

    async def sweep(self) -> int:
        """Delete reservation records past their expiry (their holds have lapsed already)."""
        now = self._clock()
        deleted = 0
        for entry in await self._backend.list_state(RESERVATIONS_SCOPE):
            if Reservation.model_validate(entry.value).expires_at > now:
                continue
            try:
                if await self._backend.delete_state(
                    RESERVATIONS_SCOPE, entry.key, expected_revision=entry.revision
                ):
                    deleted += 1
            except RevisionConflict:
                continue
        return deleted
