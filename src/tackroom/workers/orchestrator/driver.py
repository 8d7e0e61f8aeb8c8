"""The driver: runs a session's turn from a ``turn-step`` delivery, one committed step at a time.

A delivery of ``turn::step {session_id, run_id}`` (queue ``turn-step``, group = session, so one
delivery per session runs at a time) loads the turn record, performs the current state's work,
feeds the outcome to the pure :func:`transition`, commits the new record with compare-and-set
*carrying* the step's effects (its outbox: session appends with deterministic entry ids, event
frames with fixed ids), then applies them. A committed outcome is never computed again: a
delivery that finds an outbox (a crash after the commit) applies it, skipping what is there. It
goes on while the next state has work, and stops when the turn parks for approval or ends. Every
commit is a checkpoint: a crash redelivers the unacknowledged message, which resumes from the last
committed step. A stale delivery (another run, a finished or parked turn with nothing new) and a
lost compare-and-set change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.approvals import DECISIONS_SCOPE, DecisionRecord, call_key
from tackroom.contracts.events import EVENTS, BudgetDecidedData, EventData, attempt_key
from tackroom.contracts.hooks import TURN_END
from tackroom.engine.errors import (
    EngineClosed,
    InvalidPayload,
    RevisionConflict,
    unavailable_cause,
)
from tackroom.engine.protocol import Engine, current_invocation, journal
from tackroom.kit.events import EventEmitter
from tackroom.kit.hooks.publish import HookSubscriptions
from tackroom.kit.lifecycle import StepContext, in_step
from tackroom.workers.orchestrator.aborts import AbortWatch
from tackroom.workers.orchestrator.context import ContextAssembler, context_overflow, mark_span
from tackroom.workers.orchestrator.dispatch import Dispatcher, Emit
from tackroom.workers.orchestrator.modelcall import HookBlocked, ModelCall
from tackroom.workers.orchestrator.outbox import frame_of, with_outbox
from tackroom.workers.orchestrator.provision import Provisioner
from tackroom.workers.orchestrator.record import TURNS_SCOPE, OutboxAppend, TurnRecord
from tackroom.workers.orchestrator.sentprompt import PromptRecorder, Sent
from tackroom.workers.orchestrator.spans import step_span
from tackroom.workers.orchestrator.spend import BudgetGuard
from tackroom.workers.orchestrator.subagents import Subagents
from tackroom.workers.orchestrator.transcript import SessionsClient
from tackroom.workers.orchestrator.transition import (
    AbortRequested,
    ApprovalsRead,
    AssistantCompleted,
    BudgetRefused,
    Effect,
    InboxDrained,
    ModelCallBlocked,
    StepEvent,
    StepFailed,
    Transition,
    TransitionError,
    transition,
)

__all__ = ["Driver"]

_log = logging.getLogger("tackroom.orchestrator")


class Driver:
    def __init__(
        self,
        engine: Engine,
        *,
        sessions: SessionsClient,
        provisioner: Provisioner,
        model: ModelCall,
        dispatcher: Dispatcher,
        subagents: Subagents,
        budget: BudgetGuard,
        context: ContextAssembler,
        hooks: HookSubscriptions | None,
        aborts: AbortWatch,
        visibility_extension: float,
    ) -> None:
        self._aborts = aborts
        self._hooks = hooks
        self._context = context
        self._engine = engine
        self._sessions = sessions
        self._provisioner = provisioner
        self._model = model
        self._dispatcher = dispatcher
        self._subagents = subagents
        self._budget = budget
        self._events = EventEmitter(engine)
        self._prompts = PromptRecorder(engine)
        self._extension = visibility_extension
        self._held: dict[str, _Held] = {}

    async def drive(self, session_id: str, run_id: str) -> None:
        """Advance the run as far as it goes without waiting for a person.

        The record is read once; each committed step's record and revision are carried to the
        next step, since only this delivery (one per session at a time) advances the turn. A
        second delivery of the session in this process (at least once: a lease that lapsed, a
        direct ``turn::step``) waits for the first rather than doing the same step's work beside
        it — which would call the model or a tool for a step about to be committed, and emit its
        events after the run ended.
        """
        async with self._exclusive(session_id):
            await self._drive(session_id, run_id)

    @contextlib.asynccontextmanager
    async def _exclusive(self, session_id: str) -> AsyncIterator[None]:
        held = self._held.get(session_id)
        if held is None:
            held = self._held[session_id] = _Held(asyncio.Lock())
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if held.users == 0:
                del self._held[session_id]

    async def _drive(self, session_id: str, run_id: str) -> None:
        entry = await self._engine.get_state(TURNS_SCOPE, session_id)
        if entry is None:
            return
        record = TurnRecord.model_validate(entry.value)
        if record.run_id != run_id:
            return
        await self._aborts.load(session_id)  # once: later requests reach the watch as notices
        invocation = current_invocation()
        progress = _Progress(
            revision=entry.revision,
            attempt=1 if invocation is None else invocation.attempt,
            events_seq=record.events_seq,
        )
        if record.outbox:
            # Perhaps applied, perhaps cut short by a crash after the commit: finish it. (Where
            # the commit and its outbox are one transaction, none is stored: see ``_commit``.)
            await self._replay_outbox(record, progress)
        if record.terminal:
            self._aborts.forget(session_id)
            await self.finish_inbox(record)
            await self._subagents.ended(record)
            await self._settled(record, progress)  # last: until then a restart wakes the run
            return
        parked_pass = True
        while True:
            if record.state == "function_awaiting_approval" and not parked_pass:
                return
            parked_pass = False
            if invocation is not None:
                await invocation.extend_visibility(self._extension)
            with _step_context(record), step_span(record) as span:
                try:
                    async with self._step_unit(record):
                        step = await self._step(record, progress)
                        if step is None or not step.changed:
                            return
                        earlier, step = await self._fold_steering_check(record, step, progress)
                        committed = await self._commit_step(record, step, progress, earlier=earlier)
                except RevisionConflict:
                    committed = None  # the step's unit lost to another delivery: none of it
                span.committed(committed)
            if committed is None:
                return
            previous, record = record, committed
            if previous.state == "steering_check" or earlier:
                await self._remove_taken(record)
            if record.terminal:
                await self._ended(previous, record, progress)
                return
            if record.state == "function_awaiting_approval":
                if previous.state == "function_awaiting_approval":
                    return  # some decisions read, others still awaited
                # Just parked: a decision may have landed before this commit, when the wake
                # found the turn not yet parked. Read the decisions once more. (A child's
                # outcome needs no such pass: its wake is a step queued behind this delivery.)
                parked_pass = any(call.status == "parked" for call in record.calls)

    async def _ended(self, previous: TurnRecord, record: TurnRecord, progress: _Progress) -> None:
        """What a run owes once its last step is committed by this delivery."""
        self._aborts.forget(record.session_id)
        if previous.state == "function_awaiting_approval":
            await self._dispatcher.gate.release_parked(previous, record)
        await self._subagents.ended(record, parent_told=progress.parent_told)
        await self._settled(record, progress)  # last: until then a restart wakes it

    def _step_unit(self, record: TurnRecord) -> contextlib.AbstractAsyncContextManager[None]:
        """A batch of subagent calls only: its children's starts (and the calls' start events)
        commit with the step that parks for them, in one unit of work (one transaction where
        the engine's units are atomic; elsewhere the writes land in order, as without one).

        Starting a child is idempotent (its ids derive from the call), so a step cut short
        starts nothing and its redelivery starts them. Not with other tools in the batch: a
        tool's ledger entry must be committed before its result is, or a crash would run it
        twice.
        """
        if record.state != "function_execute":
            return contextlib.nullcontext()
        open_calls = [call for call in record.calls if call.status in ("pending", "approved")]
        for call in open_calls:
            tool = record.tool(call.tool_name)
            if tool is None or not tool.traits.subagent:
                return contextlib.nullcontext()
        return self._engine.transaction() if open_calls else contextlib.nullcontext()

    async def _fold_steering_check(
        self, before: TurnRecord, step: Transition, progress: _Progress
    ) -> tuple[list[tuple[TurnRecord, list[Effect]]], Transition]:
        """The steering check after a batch of calls, done at once and committed with it.

        Its work is one read of the inbox, so the two steps share one commit. Not after a
        model call: a finished answer is committed before anything else may fail (a call's
        result is kept by its ledger, so a redone batch is answered again, not run again).
        """
        if before.state != "function_execute" or step.record.state != "steering_check":
            return [], step
        with _step_context(step.record), step_span(step.record) as span:
            check = await self._step(step.record, progress)
            if check is None or not check.changed:
                return [], step
            span.folded(check.record)
        return [(step.record, step.effects)], check

    async def _step(self, record: TurnRecord, progress: _Progress) -> Transition | None:
        try:
            event = await self._abort_requested(record) or await self._work(record, progress)
            return transition(record, event)
        except TransitionError as exc:
            return transition(record, StepFailed("transition_error", str(exc)))
        except Exception as exc:
            if _is_shutdown(exc):
                raise  # not the turn's fault: the unacknowledged step resumes after restart
            # An unexpected error fails the turn with a visible reason; the delivery is then
            # acknowledged, so the queue stops retrying a step that cannot succeed.
            if unavailable_cause(exc) is not None:
                raise  # the engine is away: the step is retried, the turn has not failed
            _log.exception("turn %s failed in %s", record.run_id, record.state)
            return transition(
                record,
                StepFailed("unexpected_error", f"in {record.state}: {type(exc).__name__}: {exc}"),
            )

    async def _abort_requested(self, record: TurnRecord) -> StepEvent | None:
        reason = await self._abort_reason(record)
        return None if reason is None else AbortRequested(reason)

    async def _abort_reason(self, record: TurnRecord) -> str | None:
        return await self._aborts.reason(record.session_id, record.run_id)

    async def _work(self, record: TurnRecord, progress: _Progress) -> StepEvent:
        async def emit(key: str, data: EventData) -> None:
            progress.saw(await self._emit(record, key, data))

        match record.state:
            case "provisioning":
                return await self._provisioner.provision(record)
            case "assistant_streaming":
                return await self._call_model(record, emit, attempt=progress.attempt)
            case "function_execute":
                return await self._dispatcher.run_batch(record, emit)
            case "function_awaiting_approval":
                children = await self._subagents.read_outcomes(record)
                return ApprovalsRead(await self._read_approvals(record), children)
            case "steering_check":
                return await self._take_inbox(record)
        raise TransitionError(f"no work in state {record.state}")

    async def _call_model(self, record: TurnRecord, emit: Emit, *, attempt: int) -> StepEvent:
        # The session keeps every result whole; the model reads each up to its limit, and as
        # much history as the context budget holds (compacted when it must be).
        assembled = await self._context.assemble(record)
        if assembled.overflow is not None:
            return AssistantCompleted(context_overflow(assembled.overflow))
        if assembled.decision is not None:
            key = f"t{record.turn_count + 1}:context"
            await emit(attempt_key(key, attempt), assembled.decision)
            mark_span(assembled.decision)
        messages = assembled.messages
        reservation = await self._budget.reserve(record, messages)
        if self._budget.enabled:
            # A redelivered call reserves again and may be decided otherwise: its own event id.
            key = f"t{record.turn_count + 1}:budget"
            await emit(
                attempt_key(key, attempt),
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
            return self._aborts.requested(record.session_id, record.run_id)

        sent = Sent()
        message = await self._model.call(
            record, messages, emit, attempt=attempt, abort_requested=aborted, sent=sent
        )
        self._context.observe(assembled, message.usage)
        if isinstance(message, HookBlocked):
            await self._budget.settle(record, reservation, message.usage)
            return ModelCallBlocked(
                message.topic, message.reason, blocked_by=message.blocked_by, usage=message.usage
            )
        await self._budget.settle(record, reservation, message.usage)
        if message.stop_reason == "aborted":
            reason = await self._abort_reason(record)
            if reason is not None:  # run::abort closed the stream: end as any abort does
                return AbortRequested(reason)
        prompt = await self._prompts.record(
            record.session_id, sent, assembled=messages, origins=assembled.origins
        )
        return AssistantCompleted(message, sent=prompt)

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

    async def settle(self, record: TurnRecord) -> None:
        """Finish what a finished run left undone after its last commit (its outbox, its inbox
        removal) before another run replaces its record."""
        if record.outbox:
            progress = _Progress(revision=0, attempt=1, events_seq=record.events_seq)
            await self._replay_outbox(record, progress)
        await self.finish_inbox(record)

    async def _remove_taken(self, record: TurnRecord) -> None:
        for name, items in record.inbox_taken.items():
            await self._sessions.remove(record.session_id, name, items)

    async def _commit(
        self,
        before: TurnRecord,
        step: Transition,
        progress: _Progress,
        *,
        earlier: list[tuple[TurnRecord, list[Effect]]] | None = None,
    ) -> TurnRecord | None:
        """Commit the step's record with its outbox, then apply the outbox.

        ``None`` when another delivery advanced the turn first (nothing was applied). An outcome
        the engine refuses to store (too large, too deep) fails the step once, with the reason.
        """
        record = with_outbox(
            step.record, step.effects, events_seq=progress.events_seq, earlier=earlier or ()
        )
        # The record and its effects are one unit of work. Where it is atomic the stored record
        # carries no outbox (a committed one was applied): its messages and frames are stored
        # once, where they go. Elsewhere the stored outbox keeps the step whole after a crash.
        stored = record.model_copy(update={"outbox": journal(self._engine, record.outbox)})
        try:
            async with self._engine.transaction():
                entry = await self._engine.set_state(
                    TURNS_SCOPE,
                    record.session_id,
                    stored,
                    expected_revision=progress.revision,
                )
                await self._apply_outbox(record, progress, present=frozenset())
        except RevisionConflict:
            _log.info(
                "turn %s step %d lost a compare-and-set; another delivery advanced it",
                record.run_id,
                record.step,
            )
            return None
        except InvalidPayload as exc:
            if before.terminal or step.record.state == "failed":
                raise
            reason = f"the outcome of {before.state} cannot be stored: {exc}"
            failed = transition(before, StepFailed("invalid_payload", reason))
            return await self._commit(before, failed, progress)
        progress.revision = entry.revision
        return stored

    async def _commit_step(
        self,
        before: TurnRecord,
        step: Transition,
        progress: _Progress,
        *,
        earlier: list[tuple[TurnRecord, list[Effect]]],
    ) -> TurnRecord | None:
        """:meth:`_commit`; a child run's last step also writes its outcome and its parent's
        wake, in the same unit of work, once the commit is made: a commit lost to another
        delivery tells the parent nothing. (Where the unit is not atomic, a crash between the
        commit and the wake is made good by the next delivery, which finds the run ended.)"""
        ending = step.record
        if ending.parent is None or not ending.terminal:
            return await self._commit(before, step, progress, earlier=earlier)
        try:
            async with self._engine.transaction():
                committed = await self._commit(before, step, progress, earlier=earlier)
                if committed is not None:
                    await self._subagents.notify_parent(committed)
        except RevisionConflict:
            return None  # lost at the commit: another delivery advanced the turn
        progress.parent_told = committed is not None
        return committed

    async def _settled(self, record: TurnRecord, progress: _Progress) -> None:
        """A finished run's last outbox, applied (and its inbox and parent told), is cleared
        where the commit stored one (its unit of work not atomic): a restart then wakes only the
        finished runs a crash may have cut short (``recover``), not every finished run."""
        if not record.outbox:
            return
        cleared = record.model_copy(update={"outbox": []})
        try:
            entry = await self._engine.set_state(
                TURNS_SCOPE,
                record.session_id,
                cleared,
                expected_revision=progress.revision,
            )
        except RevisionConflict:
            return  # another run replaced it: its start settled this one first
        progress.revision = entry.revision

    async def _replay_outbox(self, record: TurnRecord, progress: _Progress) -> None:
        present: set[str] = set()
        cursor = record.events_seq
        while stored := await self._engine.read(EVENTS.name, record.session_id, after=cursor):
            present.update(str(r.data.get("event_id")) for r in stored if isinstance(r.data, dict))
            cursor = stored[-1].seq
        progress.saw(cursor)
        await self._apply_outbox(record, progress, present=frozenset(present))

    async def _apply_outbox(
        self, record: TurnRecord, progress: _Progress, *, present: frozenset[str]
    ) -> None:
        for item in record.outbox:
            if isinstance(item, OutboxAppend):
                entries = [(entry.entry_id, entry.message) for entry in item.entries]
                await self._sessions.append(record.session_id, entries, principal=record.principal)
                continue
            if item.frame.get("event_id") in present:
                continue
            frame = frame_of(item, record.outbox)  # a turn_end's results filled back in
            if frame.get("type") == "turn_end":
                data = frame.get("data", {})
                await self._observe(
                    TURN_END,
                    {"session_id": record.session_id, "run_id": record.run_id, **data},
                )
            progress.saw(await self._events.emit_frame(record.session_id, frame))

    async def _emit(self, record: TurnRecord, key: str, data: EventData) -> int:
        """The event ``<run_id>:<key>``; returns its sequence."""
        return await self._events.emit_data(
            session_id=record.session_id, run_id=record.run_id, key=(key,), data=data
        )


@dataclass(slots=True)
class _Held:
    """A session this process is driving, and how many deliveries hold or wait for it."""

    lock: asyncio.Lock
    users: int = 0


@dataclass(slots=True)
class _Progress:
    """What one delivery knows as it drives: the committed revision, its own attempt number,
    the newest ``agent::events`` sequence it has seen."""

    revision: int
    attempt: int
    events_seq: int
    parent_told: bool = False
    """The run's last commit carried its outcome and its parent's wake."""

    def saw(self, seq: int) -> None:
        self.events_seq = max(self.events_seq, seq)


def _step_context(record: TurnRecord) -> contextlib.AbstractContextManager[StepContext]:
    """The step's session, run, state and lifecycle for the log records and spans made while it
    is worked (:mod:`tackroom.kit.lifecycle`)."""
    return in_step(
        session_id=record.session_id,
        run_id=record.run_id,
        state=record.state,
        error=record.error is not None,
    )


def _is_shutdown(exc: BaseException) -> bool:
    if isinstance(exc, EngineClosed):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.subgroup(EngineClosed) is not None
