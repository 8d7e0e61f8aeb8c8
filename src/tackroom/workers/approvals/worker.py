"""The ``approvals`` worker: human approval of function calls (``approval::*``), on engine state.

- ``approval::request`` (the orchestrator, when policy says ``needs_approval``): the session's
  settings may allow the call at once; else it is recorded pending with a deadline.
- ``approval::resolve``: a decision is accepted only for a call that is really pending, and is
  written **create-only**, so two decisions arriving at once produce one write (one wake of the
  turn) and the loser gets ``already_decided``. Nothing is written on an error. A call whose
  policy rule names approvers is decided only by an approver they allow (a role, four eyes), of
  the run's tenant, and — with a quorum — once enough distinct approvers allowed: each partial
  allow is kept in the pending record (:mod:`.approvers`).
- A cron sweep denies pending approvals past their deadline (reason ``expired``).

Everything lives in engine state (``contracts`` names the scopes), so a restart of any process
loses nothing. Payloads and error codes are in ``contracts``; ``docs/workers/approvals.md`` is the
guide.
"""

from __future__ import annotations

import contextlib
import time

from pydantic import Field

from tackroom.contracts import approvals as c
from tackroom.contracts.approvers import refusal
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.kit.forgetting import forget_deleted_sessions
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.approvals.approvers import (
    record_refusal,
    record_vote,
    visible_to,
    with_vote,
)
from tackroom.workers.approvals.decisions import ApprovalsBackend, Decisions, record_of
from tackroom.workers.approvals.forgetting import forget_session
from tackroom.workers.approvals.records import (
    allowed_by,
    already_decided,
    glob_matches,
    not_pending,
    parse,
    same_call,
    waiting,
    when,
)
from tackroom.workers.approvals.settings import Clock, SettingsStore

__all__ = [
    "WORKER",
    "ApprovalsBackend",
    "ApprovalsConfig",
    "ApprovalsService",
    "Clock",
    "approvals_worker",
    "glob_matches",
]

_VOTE_ATTEMPTS = 64


class ApprovalsConfig(WorkerConfig):
    ttl_seconds: float = Field(
        default=900.0, gt=0, description="how long a call waits for a person before it is denied"
    )
    sweep_schedule: str = Field(
        default="*/5 * * * * *", description="cron schedule of the expiry sweep (6 fields: seconds)"
    )
    default_mode: c.ApprovalMode = Field(
        default="manual", description="the mode of a session nobody set a mode for"
    )
    default_always_allow: list[str] = Field(
        default_factory=list, description="`auto` mode's globs for such a session"
    )


class ApprovalsService:
    """The worker's logic over an engine; every handler of ``approval::*`` is a method."""

    def __init__(
        self, engine: ApprovalsBackend, config: ApprovalsConfig, *, clock: Clock = time.time
    ) -> None:
        self._engine = engine
        self._decisions = Decisions(engine, clock=clock)
        self._config = config
        self._clock = clock
        self._settings = SettingsStore(
            engine,
            default_mode=config.default_mode,
            default_always_allow=config.default_always_allow,
            clock=clock,
        )

    # -- approval::request -------------------------------------------------------------------

    async def request(self, request: c.ApprovalRequest) -> c.ApprovalRequestResponse:
        key = c.call_key(request.session_id, request.function_call_id)
        await self._retire_other_runs(key, request.run_id)
        decided = await self._decisions.decision(key)
        if decided is not None:
            same_call(request, decided)
            if decided.decision == "allow":
                return c.ApprovalRequestResponse(
                    status="allowed", reason=f"already allowed by {decided.approver or 'unknown'}"
                )
            return c.ApprovalRequestResponse(
                status="pending", reason=f"already decided: {decided.decision}"
            )
        existing = await self._decisions.pending(key)
        if existing is not None:
            same_call(request, existing)
            return waiting(existing)

        # A call with approver rules waits for an approver they allow, whatever the session's
        # mode says (the mode is anyone's to set).
        if request.approvers is None or not request.approvers.restricts:
            settings = await self.settings(request.session_id)
            allowed = allowed_by(settings, request.function_id)
            if allowed is not None:
                return c.ApprovalRequestResponse(status="allowed", reason=allowed)

        now = self._clock()
        record = c.PendingApproval(
            session_id=request.session_id,
            function_call_id=request.function_call_id,
            function_id=request.function_id,
            arguments=request.arguments,
            reason=request.reason,
            run_id=request.run_id,
            requested_at=now,
            expires_at=now + self._config.ttl_seconds,
            approvers=request.approvers,
            requester=request.requester,
        )
        try:
            await self._engine.set_state(
                c.PENDING_SCOPE.name, key, record.model_dump(mode="json"), expected_revision=0
            )
        except RevisionConflict:  # the same request, concurrently: it recorded the call first
            existing = await self._decisions.pending(key)
            if existing is None:
                raise FunctionError(
                    c.CONTENTION_ERROR, f"call {key} changed while it was recorded; retry"
                ) from None
            same_call(request, existing)
            return waiting(existing)
        if await self._decisions.decision(key) is not None:
            # A resolve slipped in between our check and our write: its decision stands, the
            # pending record we just wrote must not outlive it.
            await self._engine.delete_state(c.PENDING_SCOPE.name, key)
            return await self.request(request)
        return waiting(record)

    # -- approval::resolve -------------------------------------------------------------------

    async def resolve(self, request: c.ResolveRequest) -> c.DecisionRecord:
        key = c.call_key(request.session_id, request.function_call_id)
        for _ in range(_VOTE_ATTEMPTS):
            # Pending first, decision second: a decision is written before its pending record is
            # deleted, so a pending record that vanished under us always leaves its decision.
            entry = await self._engine.get_state(c.PENDING_SCOPE.name, key)
            pending = None if entry is None else parse(c.PendingApproval, entry.value, key)
            decided = await self._decisions.decision(key)
            known = decided if decided is not None else pending
            if known is None:
                raise not_pending(request)
            if not visible_to(request.principal, request.session_id, known):
                await self._refused(request, known, c.NOT_PENDING_ERROR, "another tenant's call")
                raise not_pending(request)
            if decided is not None:
                raise already_decided(key, decided)
            assert pending is not None
            assert entry is not None
            if self._clock() >= pending.expires_at:
                expired = await self._decisions.decide(
                    pending, "deny", c.EXPIRED_REASON, c.EXPIRY_APPROVER
                )
                if expired is None:
                    raise already_decided(key, await self._decisions.decision(key))
                raise FunctionError(
                    c.EXPIRED_ERROR,
                    f"call {key}: the approval expired at {when(pending.expires_at)}; the call is"
                    " denied",
                )
            outcome = await self._approve(request, pending, entry.revision)
            if outcome is not None:
                return outcome
        raise FunctionError(c.CONTENTION_ERROR, f"call {key} kept changing while decided; retry")

    async def _approve(
        self, request: c.ResolveRequest, pending: c.PendingApproval, revision: int
    ) -> c.DecisionRecord | None:
        """Decide ``pending`` as ``request`` asks, under its approver rules: the decision, the
        record of an allow counted towards a quorum (``status: pending``), or ``None`` when the
        pending record changed meanwhile (look again)."""
        key = c.call_key(pending.session_id, pending.function_call_id)
        principal = request.principal
        approver = principal.id if principal is not None else request.approver or "unknown"
        rules = pending.approvers
        if rules is not None:
            why = refusal(
                rules, approver=principal, requester=pending.requester, decision=request.decision
            )
            if why is not None:
                await self._refused(request, pending, c.APPROVER_NOT_ALLOWED_ERROR, why)
                raise FunctionError(c.APPROVER_NOT_ALLOWED_ERROR, why)
            if request.decision == "allow" and principal is not None:
                now = self._clock()
                votes = with_vote(pending.votes, principal, at=now, reason=request.reason)
                counted = pending.model_copy(update={"votes": votes})
                if len(votes) < rules.quorum:
                    if votes is not pending.votes:
                        try:
                            await self._engine.set_state(
                                c.PENDING_SCOPE.name,
                                key,
                                counted.model_dump(mode="json"),
                                expected_revision=revision,
                            )
                        except RevisionConflict:
                            return None
                        await record_vote(self._engine, counted, votes[-1], needed=rules.quorum)
                    return record_of(
                        counted, "allow", request.reason, approver, principal=principal, at=now
                    )
                pending = counted
        record = await self._decisions.decide(
            pending, request.decision, request.reason, approver, principal=principal
        )
        if record is None:
            raise already_decided(key, await self._decisions.decision(key))
        return record

    async def _refused(
        self,
        request: c.ResolveRequest,
        known: c.PendingApproval | c.DecisionRecord,
        error: str,
        reason: str,
    ) -> None:
        await record_refusal(
            self._engine, request, known, error=error, reason=reason, at=self._clock()
        )

    # -- approval::get / list_pending --------------------------------------------------------

    async def get(self, request: c.GetRequest) -> c.GetResponse:
        key = c.call_key(request.session_id, request.function_call_id)
        return c.GetResponse(
            pending=await self._decisions.pending(key), decision=await self._decisions.decision(key)
        )

    async def list_pending(self, request: c.ListPendingRequest) -> c.ListPendingResponse:
        prefix = "" if request.session_id is None else f"{request.session_id}/"
        now = self._clock()
        found: list[c.PendingApproval] = []
        for entry in await self._engine.list_state(c.PENDING_SCOPE.name, prefix=prefix):
            record = parse(c.PendingApproval, entry.value, entry.key)
            if record is None or now >= record.expires_at:
                continue  # expired: the sweep denies it; it can no longer be approved
            if await self._decisions.decision(entry.key) is not None:
                continue  # decided, its pending record not yet deleted (a crash in between)
            found.append(record)
        found.sort(key=lambda r: (r.requested_at, r.session_id, r.function_call_id))
        return c.ListPendingResponse(pending=found)

    # -- settings (:mod:`.settings`) ----------------------------------------------------------

    async def settings(self, session_id: str) -> c.SessionSettings:
        return await self._settings.get(session_id)

    async def get_settings(self, request: c.SettingsRequest) -> c.SessionSettings:
        return await self._settings.get(request.session_id)

    async def set_mode(self, request: c.SetModeRequest) -> c.SessionSettings:
        return await self._settings.set_mode(request)

    async def allow_for_session(self, request: c.AllowForSessionRequest) -> c.SessionSettings:
        return await self._settings.allow_for_session(request)

    # -- approval::sweep ---------------------------------------------------------------------

    async def sweep(self, request: c.SweepRequest | None = None) -> c.SweepResponse:
        """Deny every pending approval past its deadline; drop pending records already decided."""
        now = self._clock()
        expired: list[c.CallRef] = []
        for entry in await self._engine.list_state(c.PENDING_SCOPE.name):
            record = parse(c.PendingApproval, entry.value, entry.key)
            if record is None:
                continue
            if await self._decisions.decision(entry.key) is not None:
                await self._decisions.drop_pending(entry.key, entry.revision)
                continue
            if now < record.expires_at:
                continue
            decided = await self._decisions.decide(
                record, "deny", c.EXPIRED_REASON, c.EXPIRY_APPROVER
            )
            if decided is None:  # a person's resolve won the race: fine, theirs stands
                await self._decisions.drop_pending(entry.key, entry.revision)
                continue
            expired.append(
                c.CallRef(session_id=record.session_id, function_call_id=record.function_call_id)
            )
        return c.SweepResponse(expired=expired)

    # -- internals ---------------------------------------------------------------------------

    async def _retire_other_runs(self, key: str, run_id: str | None) -> None:
        """Move an earlier run's record of this call id to the history scope.

        Providers' call ids need only be unique within a run (scripts repeat them), and a session
        runs one run at a time: a record from another run is history, not this call's answer.
        """
        if run_id is None:
            return
        for scope in (c.DECISIONS_SCOPE.name, c.PENDING_SCOPE.name):
            entry = await self._engine.get_state(scope, key)
            if entry is None or not isinstance(entry.value, dict):
                continue
            previous = entry.value.get("run_id")
            if previous is None or previous == run_id:
                continue
            await self._engine.set_state(
                c.HISTORY_SCOPE.name, f"{key}/{scope}/{entry.revision}", entry.value
            )
            # Changed meanwhile: whoever changed it decides what it is.
            with contextlib.suppress(RevisionConflict):
                await self._engine.delete_state(scope, key, expected_revision=entry.revision)


def approvals_worker(clock: Clock = time.time) -> WorkerSpec[ApprovalsConfig]:
    """The worker spec, reading time from ``clock`` (tests pass a clock they move by hand)."""

    async def start(ctx: WorkerContext[ApprovalsConfig]) -> None:
        service = ApprovalsService(ctx.engine, ctx.config, clock=clock)
        await ctx.serve(c.REQUEST, service.request)
        await ctx.serve(c.RESOLVE, service.resolve)
        await ctx.serve(c.LIST_PENDING, service.list_pending)
        await ctx.serve(c.GET, service.get)
        await ctx.serve(c.SET_MODE, service.set_mode)
        await ctx.serve(c.ALLOW_FOR_SESSION, service.allow_for_session)
        await ctx.serve(c.GET_SETTINGS, service.get_settings)
        await ctx.serve(c.SWEEP, service.sweep)
        await ctx.add_cron_trigger(ctx.config.sweep_schedule, c.SWEEP.id)
        await forget_deleted_sessions(ctx, lambda session_id: forget_session(ctx, session_id))

    return WorkerSpec(
        name="approvals",
        description="Human approval of function calls: pending, decided once, expired by TTL.",
        config_model=ApprovalsConfig,
        start=start,
    )


WORKER = approvals_worker()
