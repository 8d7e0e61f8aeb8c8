"""The kill switch (:mod:`tackroom.contracts.runholds`), served by the orchestrator: it alone
knows every turn record, on any host (the ``turns`` scope is the engine's shared state).

``runs::hold`` stores the switch first, then aborts the matching runs in flight through the
orchestrator's own ``run::abort`` (twice over: a start that read no switch an instant before it
was stored is caught by the second pass); ``run::start`` calls :func:`refuse_if_held` first.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel

from tackroom.contracts.audit import AuditFact
from tackroom.contracts.principal import Principal
from tackroom.contracts.runholds import (
    HOLD,
    HOLDS,
    HOLDS_SCOPE,
    RELEASE,
    RUNS_HELD_ERROR,
    AbortedRun,
    Hold,
    HoldRequest,
    HoldResponse,
    HoldsRequest,
    ReleaseRequest,
    ReleaseResponse,
    TenantHolds,
    held_message,
)
from tackroom.contracts.tenancy import tenant_of
from tackroom.contracts.turn import RunAbortRequest, RunAbortResponse
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import Engine
from tackroom.kit.audit import record_fact
from tackroom.runtime.worker import WorkerContext
from tackroom.workers.orchestrator.record import TURNS_SCOPE, TurnRecord

__all__ = ["RunHolds", "refuse_if_held", "serve_holds"]

Abort = Callable[[RunAbortRequest], Awaitable[RunAbortResponse]]
Change = Callable[[TenantHolds], TenantHolds | None]

Config = TypeVar("Config", bound=BaseModel)

_PASSES = 2
_CAS_TRIES = 20


async def refuse_if_held(engine: Engine, principal: Principal | None, session_id: str) -> None:
    """Raise ``runs_held`` when a kill switch holds the runs of whom this one acts for."""
    tenant = principal.tenant if principal is not None else tenant_of(session_id)
    holds = await HOLDS_SCOPE.get(engine, tenant)
    if holds is None:
        return
    who = None if principal is None else principal.id
    hold = holds.holding(who)
    if hold is not None:
        named = None if holds.everyone is not None else who
        raise FunctionError(RUNS_HELD_ERROR, held_message(tenant, named, hold))


def _owner(record: TurnRecord) -> tuple[str, str | None]:
    """The tenant and principal id a run acts for."""
    if record.principal is not None:
        return record.principal.tenant, record.principal.id
    return tenant_of(record.session_id), None


class RunHolds:
    def __init__(self, engine: Engine, *, abort: Abort) -> None:
        self._engine = engine
        self._abort = abort

    async def hold(self, request: HoldRequest) -> HoldResponse:
        switch = Hold(reason=request.reason, held_by=request.actor.id, at=time.time())
        already = False

        def turn_on(holds: TenantHolds) -> TenantHolds | None:
            nonlocal already
            current = holds.everyone if request.principal is None else None
            if request.principal is not None:
                current = holds.principals.get(request.principal)
            already = current is not None
            if already:
                return None
            if request.principal is None:
                return holds.model_copy(update={"everyone": switch})
            principals = {**holds.principals, request.principal: switch}
            return holds.model_copy(update={"principals": principals})

        await self._change(request.tenant, turn_on)
        if not already:
            await record_fact(self._engine, _fact("runs_held", request, reason=request.reason))
        aborted: dict[tuple[str, str], AbortedRun] = {}
        reason = f"aborted by a kill switch: {request.reason}"
        for _ in range(_PASSES):
            for run in await self._abort_matching(request.tenant, request.principal, reason):
                aborted.setdefault((run.session_id, run.run_id), run)
        return HoldResponse(
            tenant=request.tenant,
            principal=request.principal,
            already_held=already,
            aborted=list(aborted.values()),
        )

    async def release(self, request: ReleaseRequest) -> ReleaseResponse:
        released = False

        def turn_off(holds: TenantHolds) -> TenantHolds | None:
            nonlocal released
            if request.principal is None:
                released = holds.everyone is not None
                return holds.model_copy(update={"everyone": None}) if released else None
            released = request.principal in holds.principals
            if not released:
                return None
            rest = {k: v for k, v in holds.principals.items() if k != request.principal}
            return holds.model_copy(update={"principals": rest})

        await self._change(request.tenant, turn_off)
        if released:
            await record_fact(self._engine, _fact("runs_released", request))
        return ReleaseResponse(
            tenant=request.tenant, principal=request.principal, released=released
        )

    async def holds(self, request: HoldsRequest) -> TenantHolds:
        found = await HOLDS_SCOPE.get(self._engine, request.tenant)
        return found if found is not None else TenantHolds(tenant=request.tenant)

    async def _change(self, tenant: str, change: Change) -> None:
        """Apply ``change`` with compare-and-set (``None`` from it: nothing to write)."""
        for _ in range(_CAS_TRIES):
            found = await HOLDS_SCOPE.get_entry(self._engine, tenant)
            holds, revision = found if found is not None else (TenantHolds(tenant=tenant), 0)
            changed = change(holds)
            if changed is None:
                return
            try:
                if changed.empty:
                    await HOLDS_SCOPE.delete(self._engine, tenant, expected_revision=revision)
                else:
                    await HOLDS_SCOPE.set(self._engine, tenant, changed, expected_revision=revision)
                return
            except RevisionConflict:
                continue
        raise FunctionError("contention", f"the kill switch of {tenant!r} kept changing: retry")

    async def _abort_matching(
        self, tenant: str, principal_id: str | None, reason: str
    ) -> list[AbortedRun]:
        aborted: list[AbortedRun] = []
        for entry in await self._engine.list_state(TURNS_SCOPE):
            record = TurnRecord.model_validate(entry.value)
            owner, who = _owner(record)
            if record.terminal or owner != tenant:
                continue
            if principal_id is not None and who != principal_id:
                continue
            answer = await self._abort(RunAbortRequest(session_id=record.session_id, reason=reason))
            if answer.aborted:
                aborted.append(
                    AbortedRun(
                        session_id=record.session_id,
                        run_id=record.run_id,
                        principal=who,
                        state=str(answer.state or record.state),
                    )
                )
        return aborted


def _fact(
    kind: str, request: HoldRequest | ReleaseRequest, *, reason: str | None = None
) -> AuditFact:
    fact: dict[str, object] = {"tenant": request.tenant, "principal": request.principal}
    if reason is not None:
        fact["reason"] = reason
    return AuditFact(
        fact_id=f"{kind}:{uuid.uuid4().hex}",
        kind=kind,
        principal=request.actor,
        actor=request.actor.id,
        at=time.time(),
        fact=fact,
    )


async def serve_holds(ctx: WorkerContext[Config], abort: Abort) -> None:
    """Serve ``runs::hold``, ``runs::release`` and ``runs::holds``; ``abort`` is ``run::abort``'s
    handler."""
    holds = RunHolds(ctx.engine, abort=abort)
    await ctx.serve(HOLD, holds.hold)
    await ctx.serve(RELEASE, holds.release)
    await ctx.serve(HOLDS, holds.holds)
