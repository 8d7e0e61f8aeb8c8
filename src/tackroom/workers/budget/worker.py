"""The ``budget`` worker: the 14 ``budget::*`` functions (and the internal ``budget::sweep``).

Payloads and codes are in ``contracts``, what is stored where in ``records``. ``make_worker`` takes
a clock and a state wrapper for tests; ``WORKER`` is the real thing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import Field

from tackroom.contracts import budget as c
from tackroom.engine.protocol import Engine
from tackroom.kit.cas import StateBackend
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.budget.book import BudgetBook
from tackroom.workers.budget.ledger import Ledger
from tackroom.workers.budget.reports import Reports

__all__ = ["WORKER", "BudgetConfig", "make_worker"]


class BudgetConfig(WorkerConfig):
    max_attempts: int = Field(
        default=256, ge=1, description="compare-and-set attempts before failing with 'contention'"
    )
    reservation_ttl_s: float = Field(
        default=600.0, gt=0, description="how long a check's hold lasts without a record"
    )
    sweep_schedule: str | None = Field(
        default="*/5 * * * *", description="cron of the expired-reservation sweep; null: off"
    )


def make_worker(
    *,
    clock: Callable[[], float] = time.time,
    state: Callable[[Engine], StateBackend] | None = None,
) -> WorkerSpec[BudgetConfig]:
    """The budget worker with its clock and state access injected (``state`` wraps the engine)."""

    async def start(ctx: WorkerContext[BudgetConfig]) -> None:
        await _start(ctx, clock=clock, backend=ctx.engine if state is None else state(ctx.engine))

    return WorkerSpec(
        name="budget",
        description="LLM spend budgets: reserve before each model call, settle after, alert.",
        config_model=BudgetConfig,
        start=start,
    )


async def _start(
    ctx: WorkerContext[BudgetConfig], *, clock: Callable[[], float], backend: StateBackend
) -> None:
    config = ctx.config
    book = BudgetBook(backend, clock=clock, max_attempts=config.max_attempts)
    ledger = Ledger(
        backend,
        ctx.engine,
        book,
        clock=clock,
        max_attempts=config.max_attempts,
        reservation_ttl_s=config.reservation_ttl_s,
    )
    reports = Reports(backend, clock=clock)

    async def create(request: c.CreateRequest) -> c.Budget:
        return await book.create(request)

    async def list_budgets(request: c.ListRequest) -> c.BudgetList:
        return c.BudgetList(budgets=await book.all(request.scope, tenant=request.tenant))

    async def get(request: c.BudgetRef) -> c.Budget:
        return await book.get(request.budget_id)

    async def update(request: c.UpdateRequest) -> c.Budget:
        patch = request.model_dump(exclude={"budget_id"}, exclude_none=True)
        return await book.change(request.budget_id, **patch)

    async def delete(request: c.BudgetRef) -> c.Deleted:
        return c.Deleted(deleted=await book.delete(request.budget_id))

    async def reset(request: c.BudgetRef) -> c.PeriodUsage:
        await ledger.reset(await book.get(request.budget_id))
        return await reports.current(await book.get(request.budget_id))

    async def alert_set(request: c.AlertSetRequest) -> c.Budget:
        thresholds = sorted(set(request.thresholds))
        return await book.change(
            request.budget_id, alert_thresholds=thresholds, alert_function=request.function_id
        )

    async def usage(request: c.UsageRequest) -> c.UsageResponse:
        return await reports.usage(await book.get(request.budget_id), periods=request.periods)

    async def forecast(request: c.BudgetRef) -> c.Forecast:
        return await reports.forecast(await book.get(request.budget_id))

    async def enforce(request: c.EnforceRequest) -> c.Budget:
        return await book.change(request.budget_id, enforce=request.enforce)

    async def exempt(request: c.ExemptRequest) -> c.Budget:
        until = request.until if request.exempt else None
        return await book.change(request.budget_id, exempt=request.exempt, exempt_until=until)

    async def pause(request: c.PauseRequest) -> c.Budget:
        return await book.change(request.budget_id, paused=request.paused)

    async def sweep(request: c.SweepRequest) -> c.SweepResponse:
        return c.SweepResponse(deleted=await reports.sweep())

    await ctx.serve(c.CREATE, create)
    await ctx.serve(c.LIST, list_budgets)
    await ctx.serve(c.GET, get)
    await ctx.serve(c.UPDATE, update)
    await ctx.serve(c.DELETE, delete)
    await ctx.serve(c.CHECK, ledger.check)
    await ctx.serve(c.RECORD, ledger.record)
    await ctx.serve(c.RESET, reset)
    await ctx.serve(c.ALERT_SET, alert_set)
    await ctx.serve(c.USAGE, usage)
    await ctx.serve(c.FORECAST, forecast)
    await ctx.serve(c.ENFORCE, enforce)
    await ctx.serve(c.EXEMPT, exempt)
    await ctx.serve(c.PAUSE, pause)
    await ctx.serve(c.SWEEP, sweep)
    if config.sweep_schedule is not None:
        await ctx.add_cron_trigger(config.sweep_schedule, c.SWEEP.id)


WORKER = make_worker()
