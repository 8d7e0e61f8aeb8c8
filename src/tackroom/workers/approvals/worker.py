"""The ``approvals`` worker: human approval of function calls (``approval::*``), on engine state.

- ``approval::request`` (the orchestrator, when policy says ``needs_approval``): the session's
  settings may allow the call at once; else it is recorded pending with a deadline.
- ``approval::resolve``: a decision is accepted only for a call that is really pending, and is
  written **create-only**, so two decisions arriving at once produce one write (one wake of the
  turn) and the loser gets ``already_decided``. Nothing is written on an error.
- A cron sweep denies pending approvals past their deadline (reason ``expired``).

Everything lives in engine state (``contracts`` names the scopes), so a restart of any process
loses nothing. Payloads and error codes are in ``contracts``; ``docs/workers/approvals.md`` is the
guide.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, Field, ValidationError

from tackroom.contracts import approvals as c
from tackroom.contracts.events import ApprovalResolvedData
from tackroom.engine.errors import EngineError, FunctionError, RevisionConflict
from tackroom.engine.protocol import StateEntry
from tackroom.kit.events import EventEmitter
from tackroom.kit.forgetting import forget_deleted_sessions
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.approvals.forgetting import forget_session

__all__ = [
    "WORKER",
    "ApprovalsBackend",
    "ApprovalsConfig",
    "ApprovalsService",
    "Clock",
    "approvals_worker",
    "glob_matches",
]

_log = logging.getLogger("tackroom.approvals")

Clock = Callable[[], float]
"""Seconds since the epoch (``time.time``; tests pass a clock they move by hand)."""

_SETTINGS_ATTEMPTS = 64

M = TypeVar("M", bound=BaseModel)


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


class ApprovalsBackend(Protocol):
    """The engine methods the worker uses (an ``Engine`` is one)."""

    async def get_state(self, scope: str, key: str) -> StateEntry | None: ...

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry: ...

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool: ...

    async def list_state(self, scope: str, *, prefix: str = "") -> list[StateEntry]: ...

    async def append(self, stream: str, group_id: str, data: Any) -> int: ...

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]: ...


def glob_matches(pattern: str, function_id: str) -> bool:
    """``*`` (any run of characters, ``::`` included) is the only wildcard; the match is whole."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, function_id) is not None


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "an unknown time"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApprovalsService:
    """The worker's logic over an engine; every handler of ``approval::*`` is a method."""

    def __init__(
        self, engine: ApprovalsBackend, config: ApprovalsConfig, *, clock: Clock = time.time
    ) -> None:
        self._engine = engine
        self._events = EventEmitter(engine)
        self._config = config
        self._clock = clock

    # -- approval::request -------------------------------------------------------------------

    async def request(self, request: c.ApprovalRequest) -> c.ApprovalRequestResponse:
        key = c.call_key(request.session_id, request.function_call_id)
        await self._retire_other_runs(key, request.run_id)
        decided = await self._decision(key)
        if decided is not None:
            _same_call(request, decided)
            if decided.decision == "allow":
                return c.ApprovalRequestResponse(
                    status="allowed", reason=f"already allowed by {decided.approver or 'unknown'}"
                )
            return c.ApprovalRequestResponse(
                status="pending", reason=f"already decided: {decided.decision}"
            )
        existing = await self._pending(key)
        if existing is not None:
            _same_call(request, existing)
            return _waiting(existing)

        settings = await self.settings(request.session_id)
        allowed_by = _allowed_by(settings, request.function_id)
        if allowed_by is not None:
            return c.ApprovalRequestResponse(status="allowed", reason=allowed_by)

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
        )
        try:
            await self._engine.set_state(
                c.PENDING_SCOPE.name, key, record.model_dump(mode="json"), expected_revision=0
            )
        except RevisionConflict:  # the same request, concurrently: it recorded the call first
            existing = await self._pending(key)
            if existing is None:
                raise FunctionError(
                    c.CONTENTION_ERROR, f"call {key} changed while it was recorded; retry"
                ) from None
            _same_call(request, existing)
            return _waiting(existing)
        if await self._decision(key) is not None:
            # A resolve slipped in between our check and our write: its decision stands, the
            # pending record we just wrote must not outlive it.
            await self._engine.delete_state(c.PENDING_SCOPE.name, key)
            return await self.request(request)
        return _waiting(record)

    # -- approval::resolve -------------------------------------------------------------------

    async def resolve(self, request: c.ResolveRequest) -> c.DecisionRecord:
        key = c.call_key(request.session_id, request.function_call_id)
        # Pending first, decision second: a decision is written before its pending record is
        # deleted, so a pending record that vanished under us always leaves its decision behind.
        pending = await self._pending(key)
        decided = await self._decision(key)
        if decided is not None:
            raise _already_decided(key, decided)
        if pending is None:
            raise FunctionError(
                c.NOT_PENDING_ERROR,
                f"call {request.function_call_id} of session {request.session_id} is not waiting"
                " for approval",
            )
        if self._clock() >= pending.expires_at:
            expired = await self._decide(pending, "deny", c.EXPIRED_REASON, c.EXPIRY_APPROVER)
            if expired is None:
                raise _already_decided(key, await self._decision(key))
            raise FunctionError(
                c.EXPIRED_ERROR,
                f"call {key}: the approval expired at {_when(pending.expires_at)}; the call is"
                " denied",
            )
        approver = request.approver or "unknown"
        record = await self._decide(pending, request.decision, request.reason, approver)
        if record is None:
            raise _already_decided(key, await self._decision(key))
        return record

    # -- approval::get / list_pending --------------------------------------------------------

    async def get(self, request: c.GetRequest) -> c.GetResponse:
        key = c.call_key(request.session_id, request.function_call_id)
        return c.GetResponse(pending=await self._pending(key), decision=await self._decision(key))

    async def list_pending(self, request: c.ListPendingRequest) -> c.ListPendingResponse:
        prefix = "" if request.session_id is None else f"{request.session_id}/"
        now = self._clock()
        waiting: list[c.PendingApproval] = []
        for entry in await self._engine.list_state(c.PENDING_SCOPE.name, prefix=prefix):
            record = _parse(c.PendingApproval, entry.value, entry.key)
            if record is None or now >= record.expires_at:
                continue  # expired: the sweep denies it; it can no longer be approved
            if await self._decision(entry.key) is not None:
                continue  # decided, its pending record not yet deleted (a crash in between)
            waiting.append(record)
        waiting.sort(key=lambda r: (r.requested_at, r.session_id, r.function_call_id))
        return c.ListPendingResponse(pending=waiting)

    # -- settings ----------------------------------------------------------------------------

    async def settings(self, session_id: str) -> c.SessionSettings:
        entry = await self._engine.get_state(c.SETTINGS_SCOPE.name, session_id)
        stored = None if entry is None else _parse(c.SessionSettings, entry.value, session_id)
        return stored or self._default_settings(session_id)

    async def get_settings(self, request: c.SettingsRequest) -> c.SessionSettings:
        return await self.settings(request.session_id)

    async def set_mode(self, request: c.SetModeRequest) -> c.SessionSettings:
        def change(current: c.SessionSettings) -> c.SessionSettings:
            update: dict[str, Any] = {"mode": request.mode}
            if request.always_allow is not None:
                update["always_allow"] = list(dict.fromkeys(request.always_allow))
            return current.model_copy(update=update)

        return await self._update_settings(request.session_id, change)

    async def allow_for_session(self, request: c.AllowForSessionRequest) -> c.SessionSettings:
        def change(current: c.SessionSettings) -> c.SessionSettings:
            allowed = list(dict.fromkeys([*current.allowed_functions, request.function_id]))
            return current.model_copy(update={"allowed_functions": allowed})

        return await self._update_settings(request.session_id, change)

    # -- approval::sweep ---------------------------------------------------------------------

    async def sweep(self, request: c.SweepRequest | None = None) -> c.SweepResponse:
        """Deny every pending approval past its deadline; drop pending records already decided."""
        now = self._clock()
        expired: list[c.CallRef] = []
        for entry in await self._engine.list_state(c.PENDING_SCOPE.name):
            record = _parse(c.PendingApproval, entry.value, entry.key)
            if record is None:
                continue
            if await self._decision(entry.key) is not None:
                await self._drop_pending(entry.key, entry.revision)
                continue
            if now < record.expires_at:
                continue
            decided = await self._decide(record, "deny", c.EXPIRED_REASON, c.EXPIRY_APPROVER)
            if decided is None:  # a person's resolve won the race: fine, theirs stands
                await self._drop_pending(entry.key, entry.revision)
                continue
            expired.append(
                c.CallRef(session_id=record.session_id, function_call_id=record.function_call_id)
            )
        return c.SweepResponse(expired=expired)

    # -- internals ---------------------------------------------------------------------------

    async def _decide(
        self,
        pending: c.PendingApproval,
        decision: c.Decision,
        reason: str | None,
        approver: str,
    ) -> c.DecisionRecord | None:
        """Write the decision create-only; ``None`` when another decision was there first."""
        key = c.call_key(pending.session_id, pending.function_call_id)
        record = c.DecisionRecord(
            decision=decision,
            reason=reason,
            approver=approver,
            decided_at=self._clock(),
            session_id=pending.session_id,
            function_call_id=pending.function_call_id,
            function_id=pending.function_id,
            arguments=pending.arguments,
            run_id=pending.run_id,
            requested_at=pending.requested_at,
        )
        try:
            await self._engine.set_state(
                c.DECISIONS_SCOPE.name, key, record.model_dump(mode="json"), expected_revision=0
            )
        except RevisionConflict:
            return None
        await self._engine.delete_state(c.PENDING_SCOPE.name, key)
        await self._emit_resolved(record)
        return record

    async def _emit_resolved(self, record: c.DecisionRecord) -> None:
        """``approval_resolved`` on the events stream (group = session); needs the run id.

        The decision is already committed: an event that cannot be appended is logged, not
        raised (the decision record, not the event, is the source of truth).
        """
        if not record.run_id or not record.session_id:
            return
        if record.function_call_id is None or record.function_id is None:
            return
        data = ApprovalResolvedData(
            function_call_id=record.function_call_id,
            function_id=record.function_id,
            decision=record.decision,
            reason=record.reason,
            approver=record.approver,
            decided_at=record.decided_at,
        )
        try:
            await self._events.emit_data(
                session_id=record.session_id,
                run_id=record.run_id,
                key=("approval", record.function_call_id),
                data=data,
            )
        except EngineError:
            _log.exception("approval_resolved for %s was not appended", record.function_call_id)

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

    async def _pending(self, key: str) -> c.PendingApproval | None:
        entry = await self._engine.get_state(c.PENDING_SCOPE.name, key)
        return None if entry is None else _parse(c.PendingApproval, entry.value, key)

    async def _decision(self, key: str) -> c.DecisionRecord | None:
        entry = await self._engine.get_state(c.DECISIONS_SCOPE.name, key)
        if entry is None:
            return None
        record = _parse(c.DecisionRecord, entry.value, key)
        # A decision is there even if we cannot read it: never treat the call as undecided.
        return record or c.DecisionRecord(decision="deny", reason="unreadable decision record")

    async def _drop_pending(self, key: str, revision: int) -> None:
        # A conflict means it was rewritten meanwhile: the next sweep looks again.
        with contextlib.suppress(RevisionConflict):
            await self._engine.delete_state(c.PENDING_SCOPE.name, key, expected_revision=revision)

    def _default_settings(self, session_id: str) -> c.SessionSettings:
        return c.SessionSettings(
            session_id=session_id,
            mode=self._config.default_mode,
            always_allow=list(self._config.default_always_allow),
        )

    async def _update_settings(
        self, session_id: str, change: Callable[[c.SessionSettings], c.SessionSettings]
    ) -> c.SessionSettings:
        for _ in range(_SETTINGS_ATTEMPTS):
            entry = await self._engine.get_state(c.SETTINGS_SCOPE.name, session_id)
            current = None if entry is None else _parse(c.SessionSettings, entry.value, session_id)
            updated = change(current or self._default_settings(session_id)).model_copy(
                update={"updated_at": self._clock()}
            )
            try:
                await self._engine.set_state(
                    c.SETTINGS_SCOPE.name,
                    session_id,
                    updated.model_dump(mode="json"),
                    expected_revision=0 if entry is None else entry.revision,
                )
            except RevisionConflict:
                continue
            return updated
        raise FunctionError(
            c.CONTENTION_ERROR, f"settings of session {session_id} kept changing; retry"
        )


def _allowed_by(settings: c.SessionSettings, function_id: str) -> str | None:
    """Why the session's settings let ``function_id`` run without a person, or ``None``."""
    if settings.mode == "full":
        return "session mode full"
    if function_id in settings.allowed_functions:
        return f"{function_id} is allowed for the rest of the session"
    if settings.mode == "auto":
        for pattern in settings.always_allow:
            if glob_matches(pattern, function_id):
                return f"session mode auto: always_allow {pattern}"
    return None


def _waiting(record: c.PendingApproval) -> c.ApprovalRequestResponse:
    return c.ApprovalRequestResponse(
        status="pending",
        reason=f"waiting for approval until {_when(record.expires_at)}",
        expires_at=record.expires_at,
    )


def _same_call(request: c.ApprovalRequest, known: c.PendingApproval | c.DecisionRecord) -> None:
    """A call id names one call: another function, other arguments or another run is refused.

    Reusing an earlier approval for a different call would run something nobody approved.
    """
    differs = []
    if known.function_id is not None and known.function_id != request.function_id:
        differs.append(f"function {known.function_id}")
    if known.arguments is not None and known.arguments != request.arguments:
        differs.append("other arguments")
    if known.run_id is not None and request.run_id is not None and known.run_id != request.run_id:
        differs.append(f"run {known.run_id}")
    if differs:
        raise FunctionError(
            c.CALL_CONFLICT_ERROR,
            f"call id {request.function_call_id} of session {request.session_id} is already used"
            f" by another call ({', '.join(differs)})",
        )


def _already_decided(key: str, record: c.DecisionRecord | None) -> FunctionError:
    if record is None:  # pragma: no cover - decisions are never deleted
        return FunctionError(c.ALREADY_DECIDED_ERROR, f"call {key} was already decided")
    reason = f" ({record.reason})" if record.reason else ""
    return FunctionError(
        c.ALREADY_DECIDED_ERROR,
        f"call {key} was already decided: {record.decision}{reason} by"
        f" {record.approver or 'unknown'} at {_when(record.decided_at)}",
    )


def _parse(model: type[M], value: Any, key: str) -> M | None:
    try:
        return model.model_validate(value)
    except ValidationError:
        _log.warning("unreadable %s record at %s; skipped", model.__name__, key)
        return None


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
