"""The orchestrator's public face: its functions, payloads and the turn states.

The event streams are :data:`tackroom.contracts.events.EVENTS` and ``TURN_END``; the decisions a
parked turn waits for are :data:`tackroom.contracts.approvals.DECISIONS_SCOPE`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tackroom.contracts.bus import Function
from tackroom.contracts.events import EVENTS, TURN_END
from tackroom.contracts.messages import AgentMessage, Usage
from tackroom.contracts.versions import rename, upgrading

__all__ = [
    "EVENTS_STREAM",
    "RUN_ABORT",
    "RUN_START",
    "TERMINAL_STATES",
    "TURN_END_STREAM",
    "TURN_GET_STATE",
    "TURN_ON_APPROVAL",
    "TURN_STEP",
    "TURN_STEP_QUEUE",
    "AgentEvent",
    "Mode",
    "ParkedCall",
    "RunAbortRequest",
    "RunAbortResponse",
    "RunStartRequest",
    "RunStartResponse",
    "TurnError",
    "TurnState",
    "TurnStateRequest",
    "TurnStateView",
]

TURN_STEP = "turn::step"
"""The orchestrator's own step function, fed by queue :data:`TURN_STEP_QUEUE` with
``{session_id, run_id}``; nobody else calls it."""
TURN_ON_APPROVAL = "turn::on_approval"
"""The orchestrator's own state trigger on the approvals decisions scope; nobody else calls it."""
TURN_STEP_QUEUE = "turn-step"

EVENTS_STREAM = EVENTS.name
"""The name of :data:`tackroom.contracts.events.EVENTS`, for the event emitter's raw appends."""
TURN_END_STREAM = TURN_END.name
"""The name of :data:`tackroom.contracts.events.TURN_END`, for the event emitter's raw appends."""

TurnState = Literal[
    "provisioning",
    "assistant_streaming",
    "function_execute",
    "function_awaiting_approval",
    "steering_check",
    "stopped",
    "failed",
]
TERMINAL_STATES: frozenset[str] = frozenset({"stopped", "failed"})

Mode = Literal["plan", "ask", "agent"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunStartRequest(_Model):
    """Version 2 renamed ``message_id`` (which always meant the run's id) to ``run_id``; a version
    1 request is upgraded as it is read."""

    schema_version: int = 2
    session_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:@-]+$")
    run_id: str | None = Field(
        default=None,
        max_length=120,
        pattern=r"^[A-Za-z0-9_.:@-]+$",
        description="the run's id (default: generated); entry and event ids derive from it",
    )
    provider: str
    model: str
    mode: Mode = "agent"
    messages: list[AgentMessage] = Field(default_factory=list)
    max_turns: int = Field(default=8, ge=1, le=1000)
    system_prompt: str | None = Field(
        default=None, description="replaces the assembled system prompt verbatim"
    )
    instructions: str | None = Field(
        default=None,
        max_length=200_000,
        description="the application's instructions, appended to the system prompt",
    )
    tools: list[str] = Field(
        default_factory=list,
        description="function ids or globs (fs::*) offered to the model as tools",
    )
    if_busy: Literal["refuse", "queue"] = Field(
        default="refuse",
        description="when a run is in flight: refuse, or queue the messages as a follow-up",
    )

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        upgraded = upgrading(data, 2)
        if upgraded is None:
            return data
        rename(upgraded, "message_id", "run_id")
        return upgraded


class RunStartResponse(_Model):
    schema_version: int = 1
    session_id: str
    started: bool
    run_id: str | None = None
    queued: bool = False
    reason: str | None = None


class RunAbortRequest(_Model):
    session_id: str
    reason: str = "aborted by the user"


class RunAbortResponse(_Model):
    session_id: str
    aborted: bool
    state: TurnState | None = None


class TurnStateRequest(_Model):
    session_id: str


class TurnError(_Model):
    kind: str
    message: str


class ParkedCall(_Model):
    function_call_id: str
    function_id: str
    arguments: dict[str, Any]


class TurnStateView(_Model):
    schema_version: int = 1
    session_id: str
    run_id: str
    state: TurnState
    step: int
    turn_count: int
    max_turns: int
    stop_reason: str | None = None
    error: TurnError | None = None
    awaiting_approval: list[ParkedCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)


RUN_START: Function[RunStartRequest, RunStartResponse] = Function(
    "run::start",
    RunStartRequest,
    RunStartResponse,
    description="Start an agent run on a session (refused or queued if one is in flight).",
)
RUN_ABORT: Function[RunAbortRequest, RunAbortResponse] = Function(
    "run::abort",
    RunAbortRequest,
    RunAbortResponse,
    description="Abort the run in flight on a session.",
)
TURN_GET_STATE: Function[TurnStateRequest, TurnStateView | None] = Function(
    "turn::get_state",
    TurnStateRequest,
    TurnStateView | None,
    description="The turn state of a session, or null.",
)


EventType = Literal[
    "turn_state_changed",
    "message_update",
    "message_complete",
    "function_execution_start",
    "function_execution_end",
    "approval_requested",
    "approval_resolved",
    "gate_decision",
    "budget_decision",
    "turn_end",
    "agent_end",
    "error",
]


class AgentEvent(_Model):
    """One frame of ``agent::events`` (group = session id; the stream gives the sequence).

    ``event_id`` is deterministic per run and step, so a UI can drop a repeat caused by a crash
    between emitting and committing a step. ``data`` depends on ``type``:

    - ``turn_state_changed``: ``{"from", "to", "turn_count"}``
    - ``message_update``: ``{"message_id", "kind": "text"|"thinking"|"function_call", "delta"}``
      (consecutive deltas coalesced)
    - ``message_complete``: ``{"message_id", "message"}``
    - ``function_execution_start``: ``{"function_call_id", "function_id", "arguments"}``
    - ``function_execution_end``: ``{"function_call_id", "function_id", "result", "is_error",
      "duration_ms"}``
    - ``approval_requested``: ``{"function_call_id", "function_id", "arguments", "reason"}``
    - ``approval_resolved``: ``{"function_call_id", "function_id", "decision", "reason",
      "approver", "decided_at"}`` (written by the approvals worker)
    - ``gate_decision``: ``{"function_call_id", "function_id", "decision", "decided_by",
      "rule_id", "reason"}`` (only when a policy or approvals layer is configured)
    - ``budget_decision``: ``{"allowed", "estimate_usd", "reason" (a code), "detail",
      "budget_id"}``
    - ``turn_end``: ``{"turn_count", "message_id", "function_results"}``
    - ``agent_end``: ``{"state", "stop_reason", "usage"}``
    - ``error``: ``{"kind", "message"}``
    """

    schema_version: int = 1
    type: EventType
    session_id: str
    run_id: str
    event_id: str
    data: dict[str, Any] = Field(default_factory=dict)
