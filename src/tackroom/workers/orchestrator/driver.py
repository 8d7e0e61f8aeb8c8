"""The driver: runs a session's turn from a ``turn-step`` delivery, one committed step at a time.

A delivery of ``turn::step {session_id, run_id}`` (queue ``turn-step``, group = session, so one
delivery per session runs at a time) loads the turn record, performs the current state's work,
feeds the outcome to the pure :func:`transition`, executes its effects (session appends with
deterministic entry ids, events) and commits the new record with compare-and-set. It goes on
while the next state has work, and stops when the turn parks for approval or ends. Every commit
is a checkpoint: a crash redelivers the unacknowledged message, which resumes from the last
committed step. A stale delivery (another run, a finished or parked turn with nothing new) and a
lost compare-and-set change nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from tackroom.contracts.approvals import DECISIONS_SCOPE, DecisionRecord, call_key
from tackroom.contracts.events import BudgetDecidedData, EventData, TurnEndData
from tackroom.engine.errors import EngineClosed, RevisionConflict
from tackroom.engine.protocol import Engine, current_invocation
from tackroom.hooks import AFTER_MODEL_CALL, BEFORE_MODEL_CALL, TURN_END, HookSubscriptions
from tackroom.kit.events import EventEmitter
from tackroom.workers.orchestrator.dispatch import Dispatcher, Emit
from tackroom.workers.orchestrator.provision import Provisioner
from tackroom.workers.orchestrator.record import TURNS_SCOPE, TurnRecord
from tackroom.workers.orchestrator.spend import BudgetGuard
from tackroom.workers.orchestrator.streaming import ModelCaller
from tackroom.workers.orchestrator.transcript import SessionsClient
from tackroom.workers.orchestrator.transition import (
    AbortRequested,
    AppendEntries,
    ApprovalsRead,
    AssistantCompleted,
    BudgetRefused,
    EmitEvent,
    InboxDrained,
    StepEvent,
    StepFailed,
    Transition,
    TransitionError,
    transition,
)

__all__ = ["ABORT_SCOPE", "Driver"]

ABORT_SCOPE = "turn-abort"
"""Key = session id, value ``{"run_id", "reason"}``: a request to abort that run."""

_log = logging.getLogger("tackroom.orchestrator")


class Driver:
    def __init__(
        self,
        engine: Engine,
        *,
        sessions: SessionsClient,
        provisioner: Provisioner,
        model: ModelCaller,
        dispatcher: Dispatcher,
        budget: BudgetGuard,
        hooks: HookSubscriptions | None,
        visibility_extension: float,
    ) -> None:
        self._hooks = hooks
        self._engine = engine
        self._sessions = sessions
        self._provisioner = provisioner
        self._model = model
        self._dispatcher = dispatcher
        self._budget = budget
        self._events = EventEmitter(engine)
        self._extension = visibility_extension

    async def drive(self, session_id: str, run_id: str) -> None:
        """Advance the run as far as it goes without waiting for a person."""
        parked_pass = True
        while True:
            entry = await self._engine.get_state(TURNS_SCOPE, session_id)
            if entry is None:
                return
            record = TurnRecord.model_validate(entry.value)
            if record.run_id != run_id:
                return
            if record.terminal:
                # A redelivered step after a crash between the final commit and the removal.
                await self.finish_inbox(record)
                return
            if record.state == "function_awaiting_approval" and not parked_pass:
                return
            parked_pass = False
            invocation = current_invocation()
            if invocation is not None:
                await invocation.extend_visibility(self._extension)
            step = await self._step(record)
            if step is None or not step.changed:
                return
            if not await self._commit(step, entry.revision):
                return
            if record.state == "steering_check":
                await self._remove_taken(step.record)
            if step.record.terminal:
                if record.state == "function_awaiting_approval":
                    await self._dispatcher.gate.release_parked(record, step.record)
                return
            if step.record.state == "function_awaiting_approval":
                if record.state == "function_awaiting_approval":
                    return  # some decisions read, others still awaited
                # Just parked: a decision may have landed before this commit, when the wake
                # found the turn not yet parked. Read the decisions once more.
                parked_pass = True

    async def _step(self, record: TurnRecord) -> Transition | None:
        try:
            event = await self._abort_requested(record) or await self._work(record)
            return transition(record, event)
        except TransitionError as exc:
            return transition(record, StepFailed("transition_error", str(exc)))
        except Exception as exc:
            if _is_shutdown(exc):
                raise  # not the turn's fault: the unacknowledged step resumes after restart
            # An unexpected error fails the turn with a visible reason; the delivery is then
            # acknowledged, so the queue stops retrying a step that cannot succeed.
            _log.exception("turn %s failed in %s", record.run_id, record.state)
            return transition(
                record,
                StepFailed("unexpected_error", f"in {record.state}: {type(exc).__name__}: {exc}"),
            )

    async def _abort_requested(self, record: TurnRecord) -> StepEvent | None:
        reason = await self._abort_reason(record)
        return None if reason is None else AbortRequested(reason)

    async def _abort_reason(self, record: TurnRecord) -> str | None:
        entry = await self._engine.get_state(ABORT_SCOPE, record.session_id)
        if entry is not None and entry.value.get("run_id") == record.run_id:
            return str(entry.value.get("reason") or "aborted")
        return None

    async def _work(self, record: TurnRecord) -> StepEvent:
        async def emit(key: str, data: EventData) -> None:
            await self._emit(record, key, data)

        match record.state:
            case "provisioning":
                return await self._provisioner.provision(record)
            case "assistant_streaming":
                return await self._call_model(record, emit)
            case "function_execute":
                return await self._dispatcher.run_batch(record, emit)
            case "function_awaiting_approval":
                return ApprovalsRead(await self._read_approvals(record))
            case "steering_check":
                return await self._take_inbox(record)
        raise TransitionError(f"no work in state {record.state}")

    async def _call_model(self, record: TurnRecord, emit: Emit) -> StepEvent:
        messages = await self._sessions.messages(record.session_id)
        reservation = await self._budget.reserve(record, messages)
        if self._budget.enabled:
            await emit(
                f"t{record.turn_count + 1}:budget",
                BudgetDecidedData(
                    allowed=reservation.allowed,
                    estimate_usd=reservation.estimate_usd,
                    reason=reservation.reason,
                    detail=reservation.detail,
                    budget_id=reservation.budget_id,
                ),
            )
        if not reservation.allowed:
            return BudgetRefused(
                reservation.detail or reservation.reason or "the budget's cap is reached"
            )

        async def aborted() -> bool:
            return await self._abort_reason(record) is not None

        turn = {
            "session_id": record.session_id,
            "run_id": record.run_id,
            "turn": record.turn_count + 1,
        }
        await self._observe(
            BEFORE_MODEL_CALL, {**turn, "provider": record.provider, "model": record.model}
        )
        message = await self._model.call(record, messages, emit, abort_requested=aborted)
        await self._budget.settle(record, reservation, message.usage)
        if message.stop_reason == "aborted":
            reason = await self._abort_reason(record)
            if reason is not None:  # run::abort closed the stream: end as any abort does
                return AbortRequested(reason)
        await self._observe(
            AFTER_MODEL_CALL,
            {**turn, "stop_reason": message.stop_reason, "usage": message.usage.model_dump()},
        )
        return AssistantCompleted(message)

    async def _observe(self, topic: str, payload: dict[str, Any]) -> None:
        """Observing hooks: nothing at all when nobody subscribes; failures never stop a turn."""
        if self._hooks is not None:
            await self._hooks.publish(topic, payload)

    async def _read_approvals(self, record: TurnRecord) -> dict[str, DecisionRecord]:
        decisions: dict[str, DecisionRecord] = {}
        for call in record.calls:
            if call.status != "parked":
                continue
            key = call_key(record.session_id, call.id)
            entry = await self._engine.get_state(DECISIONS_SCOPE.name, key)
            if entry is None or not isinstance(entry.value, dict):
                continue
            decision = DECISIONS_SCOPE.parse(entry.value)
            if decision.run_id in (None, record.run_id):  # another run's decision is not ours
                decisions[call.id] = decision
        return decisions

    async def _take_inbox(self, record: TurnRecord) -> InboxDrained:
        """Peek, not drain: the items leave the inbox only after the step that appended them to
        the session commits (:meth:`_remove_taken`), so a crash in between loses nothing."""
        await self._remove_taken(record)
        for name in ("steering", "followup"):
            items = await self._sessions.peek(record.session_id, name)
            if items:
                taken = [item.model_dump(mode="json") for item in items]
                return InboxDrained(list(items), {name: taken})
        return InboxDrained([])

    async def finish_inbox(self, record: TurnRecord) -> None:
        """Remove what a finished run took from the inbox, if a crash left it there."""
        await self._remove_taken(record)

    async def _remove_taken(self, record: TurnRecord) -> None:
        for name, items in record.inbox_taken.items():
            await self._sessions.remove(record.session_id, name, items)

    async def _commit(self, step: Transition, revision: int) -> bool:
        record = step.record
        for index, effect in enumerate(step.effects):
            if isinstance(effect, AppendEntries):
                await self._sessions.append(record.session_id, effect.entries)
            elif isinstance(effect, EmitEvent):
                if isinstance(effect.data, TurnEndData):
                    await self._observe(
                        TURN_END,
                        {
                            "session_id": record.session_id,
                            "run_id": record.run_id,
                            **effect.data.model_dump(mode="json"),
                        },
                    )
                await self._emit(record, f"{record.step}:{index}", effect.data)
        try:
            await self._engine.set_state(
                TURNS_SCOPE,
                record.session_id,
                record.model_dump(mode="json"),
                expected_revision=revision,
            )
        except RevisionConflict:
            _log.info(
                "turn %s step %d lost a compare-and-set; another delivery advanced it",
                record.run_id,
                record.step,
            )
            return False
        return True

    async def _emit(self, record: TurnRecord, key: str, data: EventData) -> None:
        """The event ``<run_id>:<key>``: the same id whenever a step is replayed."""
        await self._events.emit_data(
            session_id=record.session_id, run_id=record.run_id, key=(key,), data=data
        )


def _is_shutdown(exc: BaseException) -> bool:
    if isinstance(exc, EngineClosed):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.subgroup(EngineClosed) is not None
