"""The typed events of ``agent::events``: one table of events, one id scheme.

Every frame is ``{schema_version, type, session_id, run_id, event_id, data}`` (group = session id;
the stream gives the sequence), and ``type`` decides the model of ``data``. Readers validate a
frame with :data:`EVENTS` (``EVENTS.parse(record.data)``) and match on the class::

    match event:
        case MessageUpdate(data=update) if update.kind == "text":
            print(update.delta, end="")
        case AgentEnd(data=end):
            ...

Each event is declared once: its data model (an :class:`EventData`) and, right after it, its
frame, which names the ``type`` and the data model. :data:`AgentEvent` lists the frames; the
types (:data:`EVENT_TYPES`) and the frame of each data model (:func:`event_of`) are read from it.

``event_id`` is deterministic per run and step (:func:`event_id`), so a UI drops a repeat caused
by a crash between emitting and committing a step.

``message_update`` and ``message_snapshot`` are *live* events: sent to the subscribers connected
at the time (``Engine.publish``), never stored. The stored ``message_complete`` is the message; a
reader that connects while one streams gets a ``message_snapshot`` of it first
(:mod:`tackroom.kit.live` merges the two). Data models ignore unknown fields, so a reader
keeps working when a newer writer adds one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.bus import Stream
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, Usage
from tackroom.contracts.modelprompts import SentPrompt
from tackroom.contracts.principal import Principal
from tackroom.contracts.turn import TurnState

__all__ = [
    "EVENTS",
    "EVENT_SCHEMA_VERSION",
    "EVENT_TYPES",
    "TURN_END",
    "AgentEnd",
    "AgentEndData",
    "AgentError",
    "AgentEvent",
    "ApprovalRequested",
    "ApprovalRequestedData",
    "ApprovalResolved",
    "ApprovalResolvedData",
    "BudgetDecided",
    "BudgetDecidedData",
    "ContextAssembled",
    "ContextAssembledData",
    "ErrorData",
    "EventData",
    "FunctionExecutionEnd",
    "FunctionExecutionEndData",
    "FunctionExecutionStart",
    "FunctionExecutionStartData",
    "GateDecided",
    "GateDecidedData",
    "Handoff",
    "HandoffData",
    "MessageComplete",
    "MessageCompleteData",
    "MessageSnapshot",
    "MessageSnapshotData",
    "MessageUpdate",
    "MessageUpdateData",
    "ModelSwitch",
    "ModelSwitchData",
    "StreamedPart",
    "SubagentEnded",
    "SubagentEndedData",
    "SubagentStarted",
    "SubagentStartedData",
    "TurnEnd",
    "TurnEndData",
    "TurnStateChanged",
    "TurnStateChangedData",
    "attempt_key",
    "event_id",
    "event_of",
    "event_type_of",
]

EVENT_SCHEMA_VERSION = 1


def event_id(run_id: str, *parts: str | int) -> str:
    """The one id scheme: ``<run_id>:<part>:<part>…``, the same on every replay of a step."""
    return ":".join([run_id, *(str(part) for part in parts)])


def attempt_key(key: str, attempt: int) -> str:
    """The key of an event a step makes anew on each delivery (a redelivered model call decides
    its budget again): ``key`` on the first attempt, ``key@<attempt>`` on a later one."""
    return key if attempt == 1 else f"{key}@{attempt}"


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, serialize_by_alias=True)


class EventData(_Data):
    """The ``data`` of an event: what an emitter is handed, its model decides the event's type
    (:func:`event_of`)."""


class _Frame(BaseModel):
    """What every frame has; each event's frame adds its ``type`` and its ``data`` model."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = EVENT_SCHEMA_VERSION
    session_id: str
    run_id: str
    event_id: str


class TurnStateChangedData(EventData):
    from_: TurnState = Field(alias="from")
    to: TurnState
    turn_count: int
    principal: Principal | None = None
    """Who the run acts for, when it named one (the audit trail learns it here)."""


class TurnStateChanged(_Frame):
    type: Literal["turn_state_changed"] = "turn_state_changed"
    data: TurnStateChangedData


StreamedKind = Literal["text", "thinking", "function_call"]


class _LiveData(EventData):
    """Live only (never stored): a message while it streams, in the stream ``stream_id``."""

    message_id: str
    stream_id: str | None = None


class MessageUpdateData(_LiveData):
    """Live only (never stored)."""

    kind: StreamedKind
    delta: str
    """Consecutive deltas of one kind, coalesced."""
    index: int = 0
    """The update's number within its ``stream_id``, from 1 (0: a writer that did not count)."""


class MessageUpdate(_Frame):
    type: Literal["message_update"] = "message_update"
    data: MessageUpdateData


class StreamedPart(_Data):
    """Consecutive deltas of one kind, joined."""

    kind: StreamedKind
    text: str


class MessageSnapshotData(_LiveData):
    """Live only: a message while it streams, as a reader connecting now has missed it."""

    parts: list[StreamedPart] = Field(default_factory=list)
    """Everything streamed so far, in order: the updates through ``through``, joined."""
    through: int = 0
    """The ``index`` of the last update it holds: later updates of the stream follow it."""


class MessageSnapshot(_Frame):
    type: Literal["message_snapshot"] = "message_snapshot"
    data: MessageSnapshotData


class MessageCompleteData(EventData):
    message_id: str
    message: AgentMessage
    sent: SentPrompt | None = Field(default=None, exclude_if=lambda value: value is None)
    """An answer's model call: what the provider was sent, by reference
    (:mod:`tackroom.contracts.modelprompts`); absent before it was recorded."""


class MessageComplete(_Frame):
    type: Literal["message_complete"] = "message_complete"
    data: MessageCompleteData


class _CallData(EventData):
    """An event of one function call (the function's id, or the tool name of one not offered)."""

    function_call_id: str
    function_id: str


class FunctionExecutionStartData(_CallData):
    arguments: dict[str, Any] = Field(default_factory=dict)


class FunctionExecutionStart(_Frame):
    type: Literal["function_execution_start"] = "function_execution_start"
    data: FunctionExecutionStartData


class FunctionExecutionEndData(_CallData):
    result: FunctionResultMessage
    is_error: bool = False
    duration_ms: float | None = None


class FunctionExecutionEnd(_Frame):
    type: Literal["function_execution_end"] = "function_execution_end"
    data: FunctionExecutionEndData


class ApprovalRequestedData(_CallData):
    arguments: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""


class ApprovalRequested(_Frame):
    type: Literal["approval_requested"] = "approval_requested"
    data: ApprovalRequestedData


class ApprovalResolvedData(_CallData):
    decision: Literal["allow", "deny", "aborted", "expired"] | str
    reason: str | None = None
    approver: str | None = None
    decided_at: float | None = None
    approver_principal: Principal | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="the deciding approver as the resolve's caller verified it",
    )
    approvals_so_far: int | None = Field(default=None, exclude_if=lambda value: value is None)
    """With approver rules: the distinct approvers that allowed (of ``needed``)."""
    needed: int | None = Field(default=None, exclude_if=lambda value: value is None)


class ApprovalResolved(_Frame):
    type: Literal["approval_resolved"] = "approval_resolved"
    data: ApprovalResolvedData


class GateDecidedData(_CallData):
    decision: Literal["allow", "deny", "needs_approval"]
    decided_by: str
    rule_id: str | None = None
    matched_constraint: dict[str, Any] | None = None
    """The policy's deciding constraint as a JSON object, e.g. ``{"arg": "path", "op": "under",
    "value": "notes"}``."""
    reason: str = ""
    principal: str | None = None
    """The id of the principal the run acts for, when the run named one."""


class GateDecided(_Frame):
    type: Literal["gate_decision"] = "gate_decision"
    data: GateDecidedData


class BudgetDecidedData(EventData):
    allowed: bool
    estimate_usd: float = 0.0
    reason: str | None = None
    """A code (``over_limit``, ``paused``, …); ``detail`` says it in words."""
    detail: str | None = None
    budget_id: str | None = None


class BudgetDecided(_Frame):
    type: Literal["budget_decision"] = "budget_decision"
    data: BudgetDecidedData


class ContextAssembledData(EventData):
    """The context budget of one model call: what the window holds and what was sent."""

    message_id: str
    window_tokens: int = Field(description="the model's window, or the agent's limit if smaller")
    reserve_tokens: int
    budget_tokens: int = Field(description="window minus reserve: what the prompt may use")
    estimated_tokens: int = Field(description="the prompt as sent, estimated")
    system_tokens: int
    tools_tokens: int
    history_tokens: int
    entries_sent: int
    pinned: int = 0
    compaction_entry_id: str | None = None
    """The compaction the context starts from, if any."""
    compacted: bool = False
    """True when this call's assembly asked the compactor first."""
    recalled: int = 0
    chars_per_token: float


class ContextAssembled(_Frame):
    type: Literal["context_assembled"] = "context_assembled"
    data: ContextAssembledData


class ModelSwitchData(EventData):
    """A model call moved to the next model of the run's chain (failover).

    Only before the failed model streamed anything, so nothing shown is taken back; the next
    model's deltas come under a new ``stream_id``.
    """

    from_provider: str
    from_model: str
    to_provider: str
    to_model: str
    error_kind: str
    """The failed call's error kind (``transient``, ``rate_limited``): what made it switch."""
    reason: str = ""
    position: int
    """The index of ``to_*`` in the run's chain (1: the first fallback)."""


class ModelSwitch(_Frame):
    type: Literal["model_switch"] = "model_switch"
    data: ModelSwitchData


class TurnEndData(EventData):
    turn_count: int
    message_id: str
    function_results: list[FunctionResultMessage] = Field(default_factory=list)


class TurnEnd(_Frame):
    type: Literal["turn_end"] = "turn_end"
    data: TurnEndData


class ErrorData(EventData):
    kind: str
    message: str


class AgentError(_Frame):
    type: Literal["error"] = "error"
    data: ErrorData


class AgentEndData(EventData):
    state: Literal["stopped", "failed"]
    stop_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    error: ErrorData | None = None
    """Why a run that did not end normally ended, in words a person can act on."""
    agent: str | None = None
    """The agent that finished the run (after a handoff, the one handed to)."""
    output_retries: int = 0
    """Corrective model calls the run made because its answer did not validate against its
    ``output_schema``."""


class AgentEnd(_Frame):
    type: Literal["agent_end"] = "agent_end"
    data: AgentEndData


class _ChildRunData(EventData):
    function_call_id: str
    agent: str
    child_session_id: str
    child_run_id: str


class SubagentStartedData(_ChildRunData):
    """A call of ``agent::<name>`` started a child run; its own events are in the child's session
    group of ``agent::events`` (a UI follows ``child_session_id``)."""


class SubagentStarted(_Frame):
    type: Literal["subagent_started"] = "subagent_started"
    data: SubagentStartedData


class SubagentEndedData(_ChildRunData):
    state: Literal["stopped", "failed"]
    stop_reason: str | None = None


class SubagentEnded(_Frame):
    type: Literal["subagent_ended"] = "subagent_ended"
    data: SubagentEndedData


class HandoffData(EventData):
    """The session goes on with ``to_agent``'s instructions, model and tools."""

    function_call_id: str
    from_agent: str | None = None
    to_agent: str
    provider: str
    model: str


class Handoff(_Frame):
    type: Literal["handoff"] = "handoff"
    data: HandoffData


AgentEvent = Annotated[
    TurnStateChanged
    | MessageUpdate
    | MessageSnapshot
    | MessageComplete
    | FunctionExecutionStart
    | FunctionExecutionEnd
    | ApprovalRequested
    | ApprovalResolved
    | GateDecided
    | BudgetDecided
    | ContextAssembled
    | ModelSwitch
    | TurnEnd
    | AgentEnd
    | AgentError
    | SubagentStarted
    | SubagentEnded
    | Handoff,
    Field(discriminator="type"),
]
"""One frame of ``agent::events``: the table of every event, the one place that lists them."""

_FRAMES: tuple[type[AgentEvent], ...] = get_args(get_args(AgentEvent)[0])


def _data_model(frame: type[AgentEvent]) -> type[EventData]:
    data = frame.model_fields["data"].annotation
    if not (isinstance(data, type) and issubclass(data, EventData)):
        raise TypeError(f"{frame.__name__}: an event's data must be an EventData model")
    return data


_FRAME_OF: dict[type[EventData], type[AgentEvent]] = {
    _data_model(frame): frame for frame in _FRAMES
}
_TYPE_OF: dict[type[EventData], str] = {
    data: frame.model_fields["type"].default for data, frame in _FRAME_OF.items()
}
EVENT_TYPES: tuple[str, ...] = tuple(_TYPE_OF.values())
"""Every event's ``type``, in the order of :data:`AgentEvent`."""


def event_type_of(data: EventData) -> str:
    """The ``type`` of the event that carries ``data``."""
    try:
        return _TYPE_OF[type(data)]
    except KeyError:
        raise _no_event(data) from None


def event_of(*, session_id: str, run_id: str, event_id: str, data: EventData) -> AgentEvent:
    """The event carrying ``data`` (its type follows from the data's model)."""
    try:
        frame = _FRAME_OF[type(data)]
    except KeyError:
        raise _no_event(data) from None
    return frame(session_id=session_id, run_id=run_id, event_id=event_id, data=data)


def _no_event(data: object) -> TypeError:
    return TypeError(
        f"{type(data).__name__} is the data of no event: declare its frame after it and list the"
        " frame in AgentEvent"
    )


EVENTS: Stream[AgentEvent] = Stream("agent::events", AgentEvent)
"""Every event of every run, grouped by session id."""

TURN_END: Stream[AgentEvent] = Stream("agent::turn_end", AgentEvent)
"""``turn_end`` frames only (what a compactor wakes on), grouped by session id."""
