"""Budgets themselves: create, read, change, delete, and find the budgets of a call's chain.

A budget is indexed under its scope before it is written, so a budget that exists is always
found by a check; an index entry whose budget is missing (a crash between the two writes) is
skipped.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from tackroom.contracts.budget import (
    BUDGET_EXISTS_ERROR,
    BUDGET_NOT_FOUND_ERROR,
    CreateRequest,
)
from tackroom.engine.errors import FunctionError
from tackroom.kit.cas import DELETE, UNCHANGED, StateBackend, mutate
from tackroom.workers.budget.records import (
    BUDGETS_SCOPE,
    INDEX_SCOPE,
    USAGE_SCOPE,
    Budget,
    IndexRecord,
)

__all__ = ["BudgetBook"]

T = TypeVar("T")


def _not_found(budget_id: str) -> FunctionError:
    return FunctionError(BUDGET_NOT_FOUND_ERROR, f"no budget {budget_id!r}")


class BudgetBook:
    def __init__(
        self,
        backend: StateBackend,
        *,
        clock: Callable[[], float],
        max_attempts: int,
        new_id: Callable[[], str] = lambda: f"b-{uuid.uuid4().hex[:12]}",
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._max_attempts = max_attempts
        self._new_id = new_id

    async def get(self, budget_id: str) -> Budget:
        entry = await self._backend.get_state(BUDGETS_SCOPE, budget_id)
        if entry is None:
            raise _not_found(budget_id)
        return Budget.model_validate(entry.value)

    async def all(self, scope: str | None = None, *, tenant: str | None = None) -> list[Budget]:
        budgets = [
            Budget.model_validate(e.value) for e in await self._backend.list_state(BUDGETS_SCOPE)
        ]
        if scope:
            budgets = [b for b in budgets if b.scope == scope or b.scope.startswith(scope)]
        if tenant is not None:
            budgets = [b for b in budgets if b.tenant == tenant]
        return sorted(budgets, key=lambda b: (b.scope, b.created_at, b.id))

    async def for_chain(
        self, chain: list[str], *, tenant: str | None = None, user: str | None = None
    ) -> list[Budget]:
        """The budgets of every scope of ``chain`` that apply to a call of ``tenant``'s
        ``user``, in chain order (then by id)."""
        indexes = await asyncio.gather(
            *(self._backend.get_state(INDEX_SCOPE, scope) for scope in chain)
        )
        wanted: list[tuple[str, str]] = []
        for scope, entry in zip(chain, indexes, strict=True):
            if entry is not None:
                ids = IndexRecord.model_validate(entry.value).budget_ids
                wanted.extend((scope, budget_id) for budget_id in sorted(ids))
        entries = await asyncio.gather(
            *(self._backend.get_state(BUDGETS_SCOPE, budget_id) for _, budget_id in wanted)
        )
        found = []
        for (scope, _), entry in zip(wanted, entries, strict=True):
            if entry is not None:
                budget = Budget.model_validate(entry.value)
                if budget.scope == scope and budget.applies_to(tenant, user):
                    found.append(budget)
        return found

    async def create(self, request: CreateRequest) -> Budget:
        budget_id = request.id or self._new_id()
        if await self._backend.get_state(BUDGETS_SCOPE, budget_id) is not None:
            raise FunctionError(BUDGET_EXISTS_ERROR, f"budget {budget_id!r} exists")
        now = self._clock()
        assert request.scope is not None  # the request resolved it
        budget = Budget(
            id=budget_id,
            scope=request.scope,
            tenant=request.tenant,
            user=request.user,
            period=request.period,
            cap_usd=request.cap_usd,
            alert_thresholds=sorted(set(request.alert_thresholds)),
            alert_function=request.alert_function,
            enforce=request.enforce,
            name=request.name,
            created_at=now,
            updated_at=now,
        )
        await self._index(budget.scope, budget_id, add=True)

        def create_only(value: Any) -> tuple[Any, bool]:
            return (
                (UNCHANGED, False) if value is not None else (budget.model_dump(mode="json"), True)
            )

        if not await self._mutate(BUDGETS_SCOPE, budget_id, create_only):
            raise FunctionError(BUDGET_EXISTS_ERROR, f"budget {budget_id!r} exists")
        return budget

    async def change(self, budget_id: str, **fields: Any) -> Budget:
        """Set ``fields`` on the budget (compare-and-set); ``budget_not_found`` if absent."""

        def apply(value: Any) -> tuple[Any, Budget]:
            if value is None:
                raise _not_found(budget_id)
            current = Budget.model_validate(value)
            updated = Budget.model_validate(
                {**current.model_dump(), **fields, "updated_at": self._clock()}
            )
            return updated.model_dump(mode="json"), updated

        return await self._mutate(BUDGETS_SCOPE, budget_id, apply)

    async def delete(self, budget_id: str) -> bool:
        """Unindex, delete, then drop its usage records; ``False`` if there was no budget."""
        entry = await self._backend.get_state(BUDGETS_SCOPE, budget_id)
        if entry is None:
            return False
        budget = Budget.model_validate(entry.value)
        await self._index(budget.scope, budget_id, add=False)

        def drop(value: Any) -> tuple[Any, bool]:
            return (DELETE, True) if value is not None else (UNCHANGED, False)

        deleted = await self._mutate(BUDGETS_SCOPE, budget_id, drop)
        for usage in await self._backend.list_state(USAGE_SCOPE, prefix=f"{budget_id}/"):
            await self._backend.delete_state(USAGE_SCOPE, usage.key)
        return deleted

    async def _index(self, scope: str, budget_id: str, *, add: bool) -> None:
        def apply(value: Any) -> tuple[Any, None]:
            ids = set([] if value is None else IndexRecord.model_validate(value).budget_ids)
            wanted = ids | {budget_id} if add else ids - {budget_id}
            if wanted == ids and (value is not None or not add):
                return UNCHANGED, None
            if not wanted:
                return DELETE, None
            return IndexRecord(budget_ids=sorted(wanted)).model_dump(mode="json"), None

        await self._mutate(INDEX_SCOPE, scope, apply)

    async def _mutate(self, scope: str, key: str, change: Callable[[Any], tuple[Any, T]]) -> T:
        return await mutate(self._backend, scope, key, change, attempts=self._max_attempts)
