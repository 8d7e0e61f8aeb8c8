"""Reserve before a model call, settle after: the money side of the budget worker.

``check`` reserves the estimate on every enforced budget of the call's chain, one budget at a
time, each by compare-and-set on that budget's usage record of the current period: the record
holds the spend *and* the live reservations, so a reservation fits under the cap or is refused
atomically, whichever process writes. If one budget refuses, the holds already taken are released
(all or nothing). A hold expires after its TTL, so a caller that dies between ``check`` and
``record`` does not keep money reserved.

``record`` settles: on each budget of the chain it drops the hold (if any), adds the actual cost
and marks the alert thresholds the new total crosses, in one compare-and-set; a threshold is
marked once per period, and the alert is enqueued by the writer that marked it. The id settled
(the reservation id, or ``record_id``) is remembered in the usage record, so a redelivered
``record`` is charged once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from tackroom.contracts.budget import (
    ALERT_QUEUE,
    EXCEEDED,
    PAUSED,
    AlertEvent,
    Charge,
    CheckRequest,
    CheckResponse,
    RecordRequest,
    RecordResponse,
    period_key,
)
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine
from tackroom.kit.cas import UNCHANGED, StateBackend, mutate
from tackroom.workers.budget.book import BudgetBook
from tackroom.workers.budget.records import (
    EPSILON,
    RESERVATIONS_SCOPE,
    SETTLED_KEPT,
    USAGE_SCOPE,
    Budget,
    Hold,
    Reservation,
    ReservedOn,
    Usage,
    money,
)

__all__ = ["Ledger", "usage_key"]

T = TypeVar("T")

_log = logging.getLogger("tackroom.budget")


def usage_key(budget_id: str, key: str) -> str:
    return f"{budget_id}/{key}"


def _usage(value: Any, budget_id: str, key: str, now: float) -> Usage:
    if value is None:
        return Usage(budget_id=budget_id, period_key=key)
    return Usage.model_validate(value).live(now)


def _dollars(amount: float) -> str:
    return f"${amount:.6f}".rstrip("0").rstrip(".")


class Ledger:
    def __init__(
        self,
        backend: StateBackend,
        engine: Engine,
        book: BudgetBook,
        *,
        clock: Callable[[], float],
        max_attempts: int,
        reservation_ttl_s: float,
        new_id: Callable[[], str] = lambda: f"r-{uuid.uuid4().hex}",
    ) -> None:
        self._backend = backend
        self._engine = engine
        self._book = book
        self._clock = clock
        self._max_attempts = max_attempts
        self._ttl = reservation_ttl_s
        self._new_id = new_id

    # -- check ---------------------------------------------------------------------------------
    async def check(self, request: CheckRequest) -> CheckResponse:
        now = self._clock()
        budgets = await self._book.for_chain(
            request.chain(), tenant=request.tenant, user=request.user
        )
        for budget in budgets:
            if budget.paused and not budget.exempt_at(now):
                detail = f"budget {budget.id} ({budget.scope}) is paused"
                return CheckResponse(
                    allowed=False, reason=PAUSED, budget_id=budget.id, detail=detail
                )
        capped = [b for b in budgets if b.enforce and not b.exempt_at(now)]
        if not capped:
            return CheckResponse(allowed=True)
        reservation_id = self._new_id()
        expires_at = now + (request.ttl_s or self._ttl)
        held: list[ReservedOn] = []
        remaining: list[float] = []
        try:  # a failure half-way (contention, a lost connection) releases what it held
            for budget in capped:
                key = period_key(budget.period, now)
                hold = Hold(amount_usd=money(request.estimate_usd), expires_at=expires_at)
                refusal, room = await self._reserve(budget, key, reservation_id, hold, now)
                if refusal is not None:
                    await self._release(reservation_id, held)
                    return CheckResponse(
                        allowed=False, reason=EXCEEDED, budget_id=budget.id, detail=refusal
                    )
                held.append(
                    ReservedOn(budget_id=budget.id, period_key=key, amount_usd=hold.amount_usd)
                )
                remaining.append(room)
            reservation = Reservation(
                reservation_id=reservation_id,
                session_id=request.session_id,
                agent=request.agent,
                workspace=request.workspace,
                tenant=request.tenant,
                user=request.user,
                leads=request.leads,
                holds=held,
                created_at=now,
                expires_at=expires_at,
            )
            await self._backend.set_state(
                RESERVATIONS_SCOPE, reservation_id, reservation.model_dump(mode="json")
            )
        except BaseException:
            await self._release(reservation_id, held)
            raise
        return CheckResponse(
            allowed=True, reservation_id=reservation_id, remaining_usd=money(min(remaining))
        )

    async def _reserve(
        self, budget: Budget, key: str, reservation_id: str, hold: Hold, now: float
    ) -> tuple[str | None, float]:
        """``(None, room left)`` with the hold written, or ``(why not, 0)`` with nothing written."""

        def apply(value: Any) -> tuple[Any, tuple[str | None, float]]:
            usage = _usage(value, budget.id, key, now)
            committed = usage.spent_usd + usage.reserved_usd()
            after = money(committed + hold.amount_usd)
            if committed >= budget.cap_usd - EPSILON or after > budget.cap_usd + EPSILON:
                why = (
                    f"budget {budget.id} ({budget.scope}, {budget.period} {key}): "
                    f"{_dollars(usage.spent_usd)} spent + {_dollars(usage.reserved_usd())} "
                    f"reserved + {_dollars(hold.amount_usd)} estimate > cap "
                    f"{_dollars(budget.cap_usd)}"
                )
                return UNCHANGED, (why, 0.0)
            holds = {**usage.reservations, reservation_id: hold}
            updated = usage.model_copy(update={"reservations": holds})
            return updated.model_dump(mode="json"), (None, money(budget.cap_usd - after))

        return await self._usage_mutate(budget.id, key, apply)

    async def _release(self, reservation_id: str, held: list[ReservedOn]) -> None:
        now = self._clock()
        for on in held:

            def apply(value: Any, on: ReservedOn = on) -> tuple[Any, None]:
                if value is None:
                    return UNCHANGED, None
                usage = _usage(value, on.budget_id, on.period_key, now)
                if reservation_id not in usage.reservations:
                    return UNCHANGED, None
                holds = {r: h for r, h in usage.reservations.items() if r != reservation_id}
                return usage.model_copy(update={"reservations": holds}).model_dump(
                    mode="json"
                ), None

            await self._usage_mutate(on.budget_id, on.period_key, apply)

    # -- record --------------------------------------------------------------------------------
    async def record(self, request: RecordRequest) -> RecordResponse:
        now = self._clock()
        reservation = None
        if request.reservation_id is not None:
            entry = await self._backend.get_state(RESERVATIONS_SCOPE, request.reservation_id)
            reservation = None if entry is None else Reservation.model_validate(entry.value)
        charged: Reservation | RecordRequest = request if reservation is None else reservation
        holds = {} if reservation is None else {h.budget_id: h for h in reservation.holds}
        settle_id = request.reservation_id or request.record_id
        response = RecordResponse(charged=[])
        budgets = await self._book.for_chain(
            charged.chain(), tenant=charged.tenant, user=charged.user
        )
        for budget in budgets:
            hold = holds.get(budget.id)
            key = hold.period_key if hold is not None else period_key(budget.period, now)
            charge, fired, usage = await self._settle(budget, key, settle_id, request.cost_usd, now)
            response.charged.append(charge)
            for threshold in fired:
                response.alerts.append(threshold)
                await self._alert(budget, usage, threshold)
        if reservation is not None and reservation.settled_at is None:
            settled = reservation.model_copy(update={"settled_at": now})
            try:
                await self._backend.set_state(
                    RESERVATIONS_SCOPE, reservation.reservation_id, settled.model_dump(mode="json")
                )
            except EngineError as exc:  # the usage records are settled; this is bookkeeping
                _log.warning(
                    "budget: marking %s settled failed: %s", reservation.reservation_id, exc
                )
        return response

    async def _settle(
        self, budget: Budget, key: str, settle_id: str | None, cost: float, now: float
    ) -> tuple[Charge, list[float], Usage]:
        def apply(value: Any) -> tuple[Any, tuple[Charge, list[float], Usage]]:
            usage = _usage(value, budget.id, key, now)
            if settle_id is not None and settle_id in usage.settled:
                charge = Charge(
                    budget_id=budget.id,
                    period_key=key,
                    spent_usd=usage.spent_usd,
                    cap_usd=budget.cap_usd,
                    duplicate=True,
                )
                return UNCHANGED, (charge, [], usage)
            spent = money(usage.spent_usd + cost)
            fired = [
                t
                for t in budget.alert_thresholds
                if t not in usage.fired and spent >= t * budget.cap_usd - EPSILON
            ]
            holds = {r: h for r, h in usage.reservations.items() if r != settle_id}
            settled = usage.settled if settle_id is None else [*usage.settled, settle_id]
            updated = usage.model_copy(
                update={
                    "spent_usd": spent,
                    "records_count": usage.records_count + 1,
                    "reservations": holds,
                    "fired": sorted([*usage.fired, *fired]),
                    "settled": settled[-SETTLED_KEPT:],
                }
            )
            charge = Charge(
                budget_id=budget.id, period_key=key, spent_usd=spent, cap_usd=budget.cap_usd
            )
            return updated.model_dump(mode="json"), (charge, fired, updated)

        return await self._usage_mutate(budget.id, key, apply)

    async def _alert(self, budget: Budget, usage: Usage, threshold: float) -> None:
        if budget.alert_function is None:
            return
        event = AlertEvent(
            budget_id=budget.id,
            scope=budget.scope,
            name=budget.name,
            period_key=usage.period_key,
            threshold=threshold,
            spent_usd=usage.spent_usd,
            cap_usd=budget.cap_usd,
        )
        dedupe = f"{budget.id}:{usage.period_key}:{usage.reset_count}:{threshold}"
        try:
            await self._engine.enqueue(
                budget.alert_function,
                event.model_dump(mode="json"),
                queue=ALERT_QUEUE,
                dedupe_key=dedupe,
            )
        except EngineError as exc:
            _log.warning("budget %s: alert at %s not sent: %s", budget.id, threshold, exc)

    # -- reset ---------------------------------------------------------------------------------
    async def reset(self, budget: Budget) -> Usage:
        """Zero the current period's spend and alert marks; live reservations stay."""
        now = self._clock()
        key = period_key(budget.period, now)

        def apply(value: Any) -> tuple[Any, Usage]:
            usage = _usage(value, budget.id, key, now)
            updated = usage.model_copy(
                update={
                    "spent_usd": 0.0,
                    "fired": [],
                    "reset_count": usage.reset_count + 1,
                    "spent_before_reset_usd": money(usage.spent_before_reset_usd + usage.spent_usd),
                }
            )
            return updated.model_dump(mode="json"), updated

        return await self._usage_mutate(budget.id, key, apply)

    async def _usage_mutate(
        self, budget_id: str, key: str, change: Callable[[Any], tuple[Any, T]]
    ) -> T:
        return await mutate(
            self._backend,
            USAGE_SCOPE,
            usage_key(budget_id, key),
            change,
            attempts=self._max_attempts,
        )
