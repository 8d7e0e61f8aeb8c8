"""The turn state machine as a pure function: ``transition(record, event) -> Transition``.

No I/O and no event loop: the driver performs each state's work (provision, call the model, run
the calls, read approvals, drain the inbox), turns the outcome into one of the events below,
commits the new record *carrying* the returned effects (its outbox, :mod:`.outbox`) with
compare-and-set, and only then applies them (append session entries, emit events).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tackroom.contracts.approvals import EXPIRY_APPROVER, DecisionRecord
from tackroom.contracts.events import (
    AgentEndData,
    ErrorData,
    EventData,
    MessageCompleteData,
    SubagentStartedData,
    TurnEndData,
    TurnStateChangedData,
    event_type_of,
)
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    FunctionResultMessage,
    TextBlock,
    Usage,
)
from tackroom.contracts.modelprompts import SentPrompt
from tackroom.contracts.turn import TurnError
from tackroom.kit.hooks.modelcalls import HookBlocked
from tackroom.workers.orchestrator.callevents import approval_requested, call_ended
from tackroom.workers.orchestrator.delegation import WAITS, ChildEnded, handoff_in, take_handoff
from tackroom.workers.orchestrator.guards import (
    DEFAULT_GUARD,
    follow_streak,
    repeated_calls,
    tool_loop_stop,
)
from tackroom.workers.orchestrator.planning import (
    call_signature,
    error_result,
    plan_calls,
    unique_call_ids,
)
from tackroom.workers.orchestrator.record import CallState, ToolOffer, TurnRecord
from tackroom.workers.orchestrator.structured import (
    OUTPUT_INVALID,
    Correct,
    GiveUp,
    OutputSpec,
    judge,
)

__all__ = [
    "LOOP_LIMIT",
    "AbortRequested",
    "AppendEntries",
    "ApprovalsRead",
    "AssistantCompleted",
    "BudgetRefused",
    "CallsSettled",
    "Effect",
    "EmitEvent",
    "InboxDrained",
    "ModelCallBlocked",
    "Provisioned",
    "StepEvent",
    "StepFailed",
    "Transition",
    "TransitionError",
    "transition",
]

LOOP_LIMIT = DEFAULT_GUARD.identical_call_limit
"""The same call (function and arguments) more than this many times in a run stops it, by
default (``loop_guard.identical_call_limit``; :mod:`.guards`)."""

_STOPPING = frozenset({"error", "aborted", "budget_exceeded"})


# -- events: what a state's work produced ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Provisioned:
    system_prompt: str
    tools: list[ToolOffer]
    plan: list[str] | None = None
    """``planned`` mode: the function ids the run may call (:mod:`.planned`)."""
    plan_usage: Usage | None = None
    """What the planning call cost."""


@dataclass(frozen=True, slots=True)
class AssistantCompleted:
    message: AssistantMessage
    sent: SentPrompt | None = None
    """What the model call was sent (by reference), told with the answer."""


@dataclass(frozen=True, slots=True)
class BudgetRefused:
    """The budget refused the next model call; nothing was spent."""

    reason: str


@dataclass(frozen=True, slots=True)
class ModelCallBlocked(HookBlocked):
    """A ``before_model_call`` or ``after_model_call`` hook stopped the model call."""


@dataclass(frozen=True, slots=True)
class CallsSettled:
    results: dict[str, FunctionResultMessage] = field(default_factory=dict)
    parked: dict[str, str] = field(default_factory=dict)
    """Call id → why it needs approval."""
    waiting: dict[str, SubagentStartedData] = field(default_factory=dict)
    """Call id → the child run a subagent call started (it waits for its outcome)."""


@dataclass(frozen=True, slots=True)
class ApprovalsRead:
    decisions: dict[str, DecisionRecord]
    children: dict[str, ChildEnded] = field(default_factory=dict)
    """Waiting calls whose child run ended."""


@dataclass(frozen=True, slots=True)
class InboxDrained:
    messages: list[AgentMessage]
    taken: dict[str, list[Any]] = field(default_factory=dict)
    """The raw inbox items behind ``messages``, by inbox name, to remove once committed."""


@dataclass(frozen=True, slots=True)
class AbortRequested:
    reason: str


@dataclass(frozen=True, slots=True)
class StepFailed:
    kind: str
    message: str


StepEvent = (
    Provisioned
    | AssistantCompleted
    | BudgetRefused
    | ModelCallBlocked
    | CallsSettled
    | ApprovalsRead
    | InboxDrained
    | AbortRequested
    | StepFailed
)


# -- effects: what the driver applies once the record carrying them is committed --------------
@dataclass(frozen=True, slots=True)
class AppendEntries:
    entries: list[tuple[str, AgentMessage]]


@dataclass(frozen=True, slots=True)
class EmitEvent:
    """Emit the event carrying ``data`` (its model says which event it is)."""

    data: EventData

    @property
    def type(self) -> str:
        return event_type_of(self.data)


Effect = AppendEntries | EmitEvent


@dataclass(slots=True)
class Transition:
    record: TurnRecord
    effects: list[Effect]
    changed: bool = True


class TransitionError(Exception):
    """An event that the record's state cannot take: a bug or a corrupted record."""


_ACCEPTS: dict[type[Any], frozenset[str]] = {
    Provisioned: frozenset({"provisioning"}),
    AssistantCompleted: frozenset({"assistant_streaming"}),
    BudgetRefused: frozenset({"assistant_streaming"}),
    ModelCallBlocked: frozenset({"assistant_streaming"}),
    CallsSettled: frozenset({"function_execute"}),
    ApprovalsRead: frozenset({"function_awaiting_approval"}),
    InboxDrained: frozenset({"steering_check"}),
}


def transition(record: TurnRecord, event: StepEvent) -> Transition:
    if record.terminal:
        raise TransitionError(f"turn {record.run_id} is {record.state}; it takes no events")
    accepted = _ACCEPTS.get(type(event))
    if accepted is not None and record.state not in accepted:
        raise TransitionError(f"{type(event).__name__} does not apply in state {record.state}")
    # Copy what the rules mutate in place (each call's fields, the call counts); every other
    # field is replaced, never mutated. A deep copy of the whole record cost ~1 ms a turn.
    new = record.model_copy(
        update={
            "calls": [call.model_copy() for call in record.calls],
            "call_counts": dict(record.call_counts),
        }
    )
    effects: list[Effect] = []
    changed = _apply(new, event, effects)
    if not changed:
        return Transition(record, [], changed=False)
    new.step += 1
    if new.state != record.state:
        effects.insert(
            0,
            EmitEvent(
                TurnStateChangedData(
                    from_=record.state,
                    to=new.state,
                    turn_count=new.turn_count,
                    principal=new.principal,
                )
            ),
        )
    return Transition(new, effects)


def _apply(r: TurnRecord, event: StepEvent, effects: list[Effect]) -> bool:
    match event:
        case Provisioned(system_prompt=prompt, tools=tools, plan=plan, plan_usage=cost):
            r.plan = plan
            if cost is not None:
                r.usage = r.usage + cost
            # The run's own messages join the session here, in the step the record commits,
            # so a crash inside run::start cannot lose them (entry ids make a re-run harmless).
            if r.initial_messages:
                effects.append(
                    AppendEntries(
                        [(r.entry_id(f"m{i}"), m) for i, m in enumerate(r.initial_messages)]
                    )
                )
                r.initial_messages = []
            r.system_prompt = prompt
            r.tools = list(tools)
            r.state = "assistant_streaming"
        case AssistantCompleted(message=message, sent=sent):
            _assistant_completed(r, message, effects, sent=sent)
        case BudgetRefused(reason=reason):
            _stop_with_note(r, "budget_exceeded", f"Stopped by the budget: {reason}", effects)
        case ModelCallBlocked():
            _blocked(r, event, effects)
        case CallsSettled(results=results, parked=parked, waiting=waiting):
            _calls_settled(r, results, parked, waiting, effects)
        case ApprovalsRead(decisions=decisions, children=children):
            return _approvals_read(r, decisions, children, effects)
        case InboxDrained(messages=messages, taken=taken):
            r.inbox_taken = dict(taken)
            _steer(r, messages, effects)
        case AbortRequested(reason=reason):
            _abort(r, reason, effects)
        case StepFailed(kind=kind, message=message):
            r.error = TurnError(kind=kind, message=message)
            r.stop_reason = "error"
            effects.append(EmitEvent(ErrorData(kind=kind, message=message)))
            _finish(r, "failed", effects)
    return True


def _assistant_completed(
    r: TurnRecord,
    message: AssistantMessage,
    effects: list[Effect],
    *,
    sent: SentPrompt | None = None,
) -> None:
    message = unique_call_ids(message, r.call_ids)
    r.call_ids = [*r.call_ids, *(block.id for block in message.function_calls())]
    r.turn_count += 1
    r.usage = r.usage + message.usage
    if r.parent is not None:  # a child's answer goes to its parent when the run ends
        r.last_assistant = message
    message_id = r.entry_id(f"t{r.turn_count}-a")
    effects.append(AppendEntries([(message_id, message)]))
    complete = MessageCompleteData(message_id=message_id, message=message, sent=sent)
    effects.append(EmitEvent(complete))
    if message.stop_reason in _STOPPING:
        r.stop_reason = message.stop_reason
        if message.stop_reason == "error":
            r.error = TurnError(
                kind=message.error_kind or "permanent",
                message=message.error_message or "the model call failed",
            )
        _turn_end(r, message_id, [], effects)
        _finish(r, "stopped", effects)
        return
    r.calls = plan_calls(message, r.tools)
    follow_streak(r)  # the same tool too many turns in a row: steered once, then stopped
    if not r.calls:
        _turn_end(r, message_id, [], effects)
        r.state = "steering_check"
        if r.output is not None:
            _judge_output(r, r.output, message, effects)
        return
    for call in r.calls:
        if call.function_id is not None:
            signature = call_signature(call.function_id, call.arguments)
            r.call_counts[signature] = r.call_counts.get(signature, 0) + 1
        if call.result is not None:
            effects.append(EmitEvent(call_ended(call, call.result, duration_ms=0)))
    r.state = "function_execute"


def _external_run(r: TurnRecord, call: CallState) -> int:
    """1 when ``call`` was to a tool with external effects and was not refused (it ran, or may
    have): what the run's cap on external calls counts."""
    tool = r.tool(call.tool_name)
    if tool is None or tool.traits.effect != "external" or call.result is None:
        return 0
    details = call.result.details
    refused = isinstance(details, dict) and details.get("status") == "denied"
    return 0 if refused else 1


def _calls_settled(
    r: TurnRecord,
    results: dict[str, FunctionResultMessage],
    parked: dict[str, str],
    waiting: dict[str, SubagentStartedData],
    effects: list[Effect],
) -> None:
    for call in r.calls:
        if call.id in results and call.status != "done":
            call.status, call.result, call.park_reason = "done", results[call.id], None
            r.external_calls += _external_run(r, call)
        elif call.id in parked and call.status == "pending":
            call.status, call.park_reason = "parked", parked[call.id]
            effects.append(EmitEvent(approval_requested(call, reason=parked[call.id])))
        elif call.id in waiting and call.status in ("pending", "approved"):
            call.status = "waiting"
            effects.append(EmitEvent(waiting[call.id]))
    if any(call.status in WAITS for call in r.calls):
        r.state = "function_awaiting_approval"
        return
    unsettled = [call.id for call in r.calls if call.status != "done"]
    if unsettled:
        raise TransitionError(f"calls {unsettled} were neither settled nor parked")
    _settle_batch(r, effects)


def _settle_batch(r: TurnRecord, effects: list[Effect]) -> None:
    results = [call.result for call in r.calls if call.result is not None]
    effects.append(
        AppendEntries([(r.entry_id(f"fr-{result.function_call_id}"), result) for result in results])
    )
    _turn_end(r, r.entry_id(f"t{r.turn_count}-a"), results, effects)
    r.state = "steering_check"
    handoff = handoff_in(r)
    if handoff is not None and r.turn_count < r.max_turns:
        note_id = r.entry_id(f"t{r.turn_count}-handoff")
        effects.append(AppendEntries([(note_id, handoff.note)]))
        effects.append(EmitEvent(handoff.event))
        take_handoff(r, handoff.target)
        r.calls = []
    else:  # the results are appended (and the ledger keeps each outcome): not kept twice
        r.calls = [call.model_copy(update={"result": None}) for call in r.calls]


def _approvals_read(
    r: TurnRecord,
    decisions: dict[str, DecisionRecord],
    children: dict[str, ChildEnded],
    effects: list[Effect],
) -> bool:
    changed = False
    for call in r.calls:
        child = children.get(call.id)
        if call.status == "waiting" and child is not None:
            call.status, call.result, changed = "done", child.result, True
            r.usage = r.usage + child.usage  # a run's cost includes its subagents'
            effects.extend([EmitEvent(child.ended), EmitEvent(child.end)])
        decision = decisions.get(call.id)
        if call.status != "parked" or decision is None:
            continue
        changed = True
        if decision.decision == "allow":
            call.status = "approved"
            continue
        if decision.approver == EXPIRY_APPROVER:
            text = "Approval expired: nobody decided within the time limit."
        else:
            verb = "denied by the user" if decision.decision == "deny" else "aborted"
            text = f"Permission {verb}" + (f": {decision.reason}" if decision.reason else "")
        call.status = "done"
        call.result = error_result(
            call,
            text,
            details={
                "status": "denied",
                "denied_by": "user",
                "decision": decision.decision,
                "reason": decision.reason,
            },
        )
    if changed and not any(call.status in WAITS for call in r.calls):
        r.state = "function_execute"
    return changed


def _steer(r: TurnRecord, messages: list[AgentMessage], effects: list[Effect]) -> None:
    if messages:
        effects.append(
            AppendEntries(
                [(r.entry_id(f"t{r.turn_count}-in{i}"), m) for i, m in enumerate(messages)]
            )
        )
    stop = repeated_calls(r) or tool_loop_stop(r)
    if stop is not None:
        _stop_with_note(r, stop.stop_reason, stop.text, effects)
        return
    if not messages and not r.calls:
        r.stop_reason = "end"
        _finish(r, "stopped", effects)
        return
    if r.turn_count >= r.max_turns:
        _stop_with_note(r, "max_turns", f"Stopped: max_turns ({r.max_turns}) reached.", effects)
        return
    r.calls = []
    r.state = "assistant_streaming"


def _abort(r: TurnRecord, reason: str, effects: list[Effect]) -> None:
    open_calls = [call for call in r.calls if call.status != "done"]
    for call in open_calls:
        call.status = "done"
        call.result = error_result(
            call,
            f"Function call aborted: {reason}",
            details={"status": "denied", "denied_by": "user", "decision": "aborted"},
        )
    if r.calls and r.state in ("function_execute", "function_awaiting_approval"):
        effects.append(
            AppendEntries(
                [(r.entry_id(f"fr-{c.id}"), c.result) for c in r.calls if c.result is not None]
            )
        )
    _stop_with_note(r, "aborted", f"Aborted: {reason}", effects)


def _blocked(r: TurnRecord, event: ModelCallBlocked, effects: list[Effect]) -> None:
    """The run stops with ``stop_reason == "blocked"``; its error says which hook and why."""
    r.usage = r.usage + event.usage
    by = f" ({event.blocked_by})" if event.blocked_by else ""
    r.error = TurnError(kind="blocked", message=f"{event.topic} hook{by}: {event.reason}")
    _stop_with_note(r, "blocked", f"Stopped by a {event.topic} hook{by}: {event.reason}", effects)


def _judge_output(
    r: TurnRecord, spec: OutputSpec, message: AssistantMessage, effects: list[Effect]
) -> None:
    """A final answer that does not validate against the run's schema: stored with a corrective
    user message, and the model asked again — a step of the turn — or, the retries spent, the
    run stops ``output_invalid`` (:mod:`.structured`)."""
    verdict = judge(spec, message, used=r.output_retries)
    if isinstance(verdict, GiveUp):
        r.error = TurnError(kind=OUTPUT_INVALID, message=verdict.reason)
        _stop_with_note(r, OUTPUT_INVALID, f"Stopped: {verdict.reason}", effects)
    elif isinstance(verdict, Correct):
        r.output_retries += 1
        entry_id = r.entry_id(f"t{r.turn_count}-fix")
        effects.append(AppendEntries([(entry_id, verdict.message)]))
        effects.append(EmitEvent(MessageCompleteData(message_id=entry_id, message=verdict.message)))
        r.state = "assistant_streaming"


def _stop_with_note(r: TurnRecord, stop_reason: str, text: str, effects: list[Effect]) -> None:
    note = CustomMessage(custom_type="turn_stopped", content=[TextBlock(text=text)])
    note_id = r.entry_id(f"stop-{stop_reason}")
    effects.append(AppendEntries([(note_id, note)]))
    effects.append(EmitEvent(MessageCompleteData(message_id=note_id, message=note)))
    r.stop_reason = stop_reason
    _finish(r, "stopped", effects)


def _turn_end(
    r: TurnRecord,
    message_id: str,
    results: list[FunctionResultMessage],
    effects: list[Effect],
) -> None:
    effects.append(
        EmitEvent(
            TurnEndData(
                turn_count=r.turn_count, message_id=message_id, function_results=list(results)
            )
        )
    )


def _finish(r: TurnRecord, state: str, effects: list[Effect]) -> None:
    r.state = "failed" if state == "failed" else "stopped"
    r.calls = [call for call in r.calls if call.status == "done"]
    effects.append(
        EmitEvent(
            AgentEndData(
                state=r.state,
                stop_reason=r.stop_reason,
                usage=r.usage,
                error=None if r.error is None else ErrorData(**r.error.model_dump()),
                agent=r.agent,
                output_retries=r.output_retries,
            )
        )
    )
