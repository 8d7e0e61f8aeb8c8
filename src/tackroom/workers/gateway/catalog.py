"""Routes about the harness itself: budgets, the function and worker catalogs, health and
readiness."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts import budget
from tackroom.contracts.budget_scopes import user_of_scope
from tackroom.contracts.engine import (
    FUNCTIONS_LIST,
    WORKERS_LIST,
    EmptyRequest,
    FunctionList,
    WorkerList,
)
from tackroom.contracts.gateway import BudgetsPage, BudgetView, ErrorBody, Health, Readiness
from tackroom.contracts.principal import DEFAULT_TENANT
from tackroom.contracts.tenancy import tenant_of
from tackroom.contracts.turn import RUN_START
from tackroom.engine.errors import EngineError
from tackroom.workers.gateway.access import may
from tackroom.workers.gateway.errors import ApiError
from tackroom.workers.gateway.operations import Operation
from tackroom.workers.gateway.service import gateway_of, reply

__all__ = ["OPERATIONS"]

_READY_TIMEOUT = 2.0


async def list_budgets(request: Request) -> Response:
    """The caller's tenant's budgets with their current period's usage (``null`` if it could not
    be read, e.g. the budget was deleted meanwhile)."""
    gateway = gateway_of(request)
    principal = await may(request, "budget_admin", "budget")
    listed = await gateway.call(budget.LIST, budget.ListRequest())
    views = []
    for item in listed.budgets:
        if _tenant_of(item) != principal.tenant:
            continue
        try:
            usage = await gateway.call(
                budget.USAGE, budget.UsageRequest(budget_id=item.id, periods=1)
            )
        except ApiError as exc:
            if exc.status >= 500:
                raise
            usage = None
        views.append(BudgetView(budget=item, usage=usage))
    return reply(BudgetsPage(budgets=views))


def _tenant_of(item: budget.Budget) -> str:
    """The tenant a budget is of: the one it is limited to, or its scope's (a tenant's, a user's,
    a session's); a budget of no tenant (a workspace's, an agent's) is the default tenant's."""
    if item.tenant is not None:
        return item.tenant
    owner = user_of_scope(item.scope)
    if owner is not None:
        return owner[0]
    kind, _, scoped = item.scope.partition("/")
    return tenant_of(scoped) if kind == "session" else DEFAULT_TENANT


async def list_functions(request: Request) -> Response:
    gateway = gateway_of(request)
    await may(request, "read", "catalog")
    functions = await gateway.call(FUNCTIONS_LIST, EmptyRequest())
    return reply(functions)


async def list_workers(request: Request) -> Response:
    gateway = gateway_of(request)
    await may(request, "read", "catalog")
    workers = await gateway.call(WORKERS_LIST, EmptyRequest())
    return reply(workers)


async def health(request: Request) -> Response:
    return reply(Health())


async def ready(request: Request) -> Response:
    """Ready when the engine answers and some worker serves ``run::start``."""
    gateway = gateway_of(request)
    try:
        async with asyncio.timeout(_READY_TIMEOUT):
            functions = await gateway.engine.list_functions()
    except TimeoutError:
        return _not_ready("the engine did not answer in time")
    except EngineError as exc:
        return _not_ready(f"the engine is unavailable: {exc}")
    if not any(info.function_id == RUN_START.id for info in functions):
        return _not_ready(f"no worker serves {RUN_START.id} (boot the orchestrator)")
    return reply(Readiness(ready=True))


def _not_ready(reason: str) -> Response:
    error = ErrorBody(code="not_ready", message=reason)
    return reply(Readiness(ready=False, reason=reason, error=error), status=503)


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/budgets",
        endpoint=list_budgets,
        operation_id="listBudgets",
        summary="Budgets with their current period's usage (budget::list, budget::usage)",
        tag="budgets",
        response=BudgetsPage,
    ),
    Operation(
        method="GET",
        path="/v1/functions",
        endpoint=list_functions,
        operation_id="listFunctions",
        summary="The function catalog (engine::functions::list)",
        tag="catalog",
        response=FunctionList,
    ),
    Operation(
        method="GET",
        path="/v1/workers",
        endpoint=list_workers,
        operation_id="listWorkers",
        summary="The workers on the bus (engine::workers::list)",
        tag="catalog",
        response=WorkerList,
    ),
    Operation(
        method="GET",
        path="/v1/health",
        endpoint=health,
        operation_id="health",
        summary="The gateway answers (no token needed)",
        tag="health",
        response=Health,
        public=True,
    ),
    Operation(
        method="GET",
        path="/v1/ready",
        endpoint=ready,
        operation_id="ready",
        summary="The engine answers and runs can start (no token needed)",
        tag="health",
        response=Readiness,
        errors=(503,),
        public=True,
    ),
)
