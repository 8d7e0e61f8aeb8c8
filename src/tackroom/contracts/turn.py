"""The orchestrator's public face: its functions, payloads and the turn states.

The event streams are :data:`tackroom.contracts.events.EVENTS` and ``TURN_END``; the decisions a
parked turn waits for are :data:`tackroom.contracts.approvals.DECISIONS_SCOPE`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tackroom.contracts.agents import ParentLink
from tackroom.contracts.bus import Function
from tackroom.contracts.context import ContextSettings
from tackroom.contracts.messages import AgentMessage, Usage
from tackroom.contracts.principal import Principal
from tackroom.contracts.versions import renamed_before

__all__ = [
    "RUN_ABORT",
    "RUN_START",
    "TASK_PATTERN",
    "TERMINAL_STATES",
    "TURN_GET_STATE",
    "TURN_ON_APPROVAL",
    "TURN_STEP",
    "TURN_STEP_QUEUE",
    "Mode",
    "ModelRef",
    "ParkedCall",
    "RunAbortRequest",
    "RunAbortResponse",
    "RunStartRequest",
    "RunStartResponse",
    "TurnError",
    "TurnState",
    "TurnStateRequest",
    "TurnStateView",
    "parse_model_chain",
]

TURN_STEP = "turn::step"
"""The orchestrator's own step function, fed by queue :data:`TURN_STEP_QUEUE` with
``{session_id, run_id}``; nobody else calls it."""
TURN_ON_APPROVAL = "turn::on_approval"
"""The orchestrator's own state trigger on the approvals decisions scope; nobody else calls it."""
TURN_STEP_QUEUE = "turn-step"

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

Mode = Literal["plan", "ask", "agent", "planned"]
"""``plan`` and ``ask`` run read-only tools only; ``agent`` acts; ``planned`` acts, but only with
the tools a plan fixed from the request names, and reads untrusted content only through handles
(docs/injection.md)."""
PLAN_FORMAT = "tool_plan"
"""The output format's name of a planned run's planning call: the model answers
``{"tools": [names]}`` (the tools the task needs), seeing only the user's request."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


TASK_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"
_MODEL_NAME = re.compile(r"^([a-zA-Z0-9_-]+):(\S.*)$")


class ModelRef(_Model):
    """One model of a run's chain: the provider name (``provider::<name>::stream``) and model."""

    provider: str = Field(pattern=r"^[a-zA-Z0-9_-]+$")
    model: str = Field(min_length=1)

    @classmethod
    def parse(cls, text: str) -> ModelRef:
        """``PROVIDER:MODEL`` (``openai:gpt-5-mini``); ``ValueError`` saying what is wrong."""
        match = _MODEL_NAME.match(text.strip())
        if match is None:
            raise ValueError(
                f"name a model as PROVIDER:MODEL, e.g. openai:gpt-5-mini (got {text!r})"
            )
        return cls(provider=match.group(1), model=match.group(2).strip())

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_model_chain(text: str) -> list[ModelRef]:
    """``openai:gpt-5-mini -> anthropic:claude-haiku-4-5 -> ollama:qwen3``: the model, then its
    fallbacks in the order they are tried."""
    return [ModelRef.parse(part) for part in text.split("->")]


class RunStartRequest(_Model):
    """Version 2 renamed ``message_id`` (which always meant the run's id) to ``run_id``; a version
    1 request is upgraded as it is read. ``output_schema``, ``output_name`` and
    ``output_retries`` and ``tool_timeout`` are optional additions of version 2 (a request without
    them is read as before)."""

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
    principal: Principal | None = Field(
        default=None,
        description="who the run acts for: checked by the gate and the policy, named in the audit",
    )
    context: ContextSettings | None = Field(
        default=None,
        description="the context budget (window limit, reserve, keep_last, recall); None: the"
        " orchestrator's defaults",
    )
    fallbacks: list[ModelRef] = Field(
        default_factory=list,
        max_length=8,
        description="models tried in order when a model call fails with a transient or "
        "rate-limit error before it streamed anything (failover)",
    )
    task: str | None = Field(
        default=None,
        pattern=TASK_PATTERN,
        description="the kind of task (a tag): the orchestrator's routes may choose the model "
        "chain by it; a task no route names keeps provider, model and fallbacks",
    )
    agent: str | None = Field(default=None, description="the name of the agent this run is")
    parent: ParentLink | None = Field(
        default=None,
        description="set by the agents worker on a child run: the parent call it answers",
    )
    output_schema: dict[str, Any] | None = Field(
        default=None,
        description="a JSON schema the final answer must validate against: asked of the model "
        "natively where the catalog says it can, checked inside the turn, corrected by further "
        "model calls of the turn (at most output_retries), else the run stops output_invalid",
    )
    output_name: str | None = Field(
        default=None, max_length=64, description="the schema's name (default: output)"
    )
    output_retries: int | None = Field(
        default=None,
        ge=0,
        le=10,
        description="corrective model calls at most (None: the orchestrator's output_retries)",
    )
    tool_timeout: float | None = Field(
        default=None,
        gt=0,
        le=86_400,
        description="seconds one tool call of this run may take at most (None: each tool's own"
        " limit, else the orchestrator's call_timeout); a tool's shorter limit still holds",
    )

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        return renamed_before(data, 2, "message_id", "run_id")


class RunStartResponse(_Model):
    schema_version: int = 1
    session_id: str
    started: bool
    run_id: str | None = None
    queued: bool = False
    reason: str | None = None
    resumed: bool = False
    """``run_id`` named the session's current or last run: nothing new was started (a retried
    start is idempotent); the run goes on, or has ended, as it was."""


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
    agent: str | None = None
    """The agent running the session now (``None``: the harness's own)."""


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
