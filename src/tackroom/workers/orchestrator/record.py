"""The durable turn record (scope ``turns``, key = session id), committed with compare-and-set."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tackroom.contracts.agents import ParentLink
from tackroom.contracts.budget import Lead
from tackroom.contracts.context import ContextSettings
from tackroom.contracts.guards import LoopGuard
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    FunctionResultMessage,
    Usage,
)
from tackroom.contracts.principal import Principal
from tackroom.contracts.provenance import Label
from tackroom.contracts.tools import CALL_CONTEXT_KEY, CallContext, OfferedTool
from tackroom.contracts.turn import (
    Mode,
    ModelRef,
    ParkedCall,
    TurnError,
    TurnState,
    TurnStateView,
)
from tackroom.contracts.versions import renamed_before, upgrading
from tackroom.workers.orchestrator.structured import OutputSpec

__all__ = [
    "RUNS_SCOPE",
    "TURNS_SCOPE",
    "CallState",
    "CallStatus",
    "OutboxAppend",
    "OutboxEntry",
    "OutboxEvent",
    "OutboxItem",
    "ToolOffer",
    "ToolStreak",
    "TurnRecord",
    "runs_key",
]

TURNS_SCOPE = "turns"
RUNS_SCOPE = "turn-runs"
"""Key ``<session>/<run>``: the final turn record of a run a later run of its session replaced."""
_ENTRY_ID = re.compile(r"[!-.0-~]+")


def runs_key(session_id: str, run_id: str) -> str:
    return f"{session_id}/{run_id}"


CallStatus = Literal["pending", "parked", "approved", "waiting", "done"]
"""``pending``: to pass the gate; ``approved``: a human allowed it, run without the gate;
``waiting``: a subagent's child run answers it (:mod:`.children`)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolOffer(OfferedTool):
    """A function offered to the model in this run, under a model-safe tool ``name``."""


class CallState(_Model):
    id: str
    tool_name: str
    function_id: str | None
    arguments: dict[str, Any]
    status: CallStatus = "pending"
    park_reason: str | None = None
    result: FunctionResultMessage | None = None


class ToolStreak(_Model):
    """The model's latest turns that called one tool and only it (:mod:`.guards`)."""

    function_id: str
    turns: int = 1
    steered: bool = False
    """The model was told it is looping (the calls of that turn did not run)."""
    stopped: bool = False
    """It called the tool again after that: the run stops at the steering check."""


class OutboxEntry(_Model):
    entry_id: str
    message: AgentMessage


class OutboxAppend(_Model):
    """Session entries the committed step appends (idempotent: each entry id is stored once)."""

    kind: Literal["append"] = "append"
    entries: list[OutboxEntry]


class OutboxEvent(_Model):
    """A stored event frame the committed step emits, exactly as ``agent::events`` keeps it —
    but for the messages it takes from entries of the same outbox, filled in when the frame is
    applied, so the record holds each message once: ``message_of`` (a ``message_complete``
    frame's ``data.message``) and ``results_of`` (a ``turn_end`` frame's
    ``data.function_results``)."""

    kind: Literal["event"] = "event"
    frame: dict[str, Any]
    message_of: str | None = None
    results_of: list[str] | None = None


OutboxItem = Annotated[OutboxAppend | OutboxEvent, Field(discriminator="kind")]


class TurnRecord(_Model):
    """Version 2 dropped ``message_id``: it was the run's id, already in ``run_id`` (or ``None``
    when the client let the run id be generated). A version 1 record is upgraded as it is read;
    the messages it holds upgrade themselves. Version 3 added the ``outbox`` and
    ``events_seq``; a version 2 record reads as one with nothing left to apply. Version 4 lets
    an outbox event take its messages from outbox entries (``message_of``, ``results_of``),
    keeps ``last_assistant`` for a child run only (its parent reads the answer) and drops the
    results of a settled batch's calls (they are appended; the ledger keeps each outcome); a
    version 3 record reads as it is. Version 5 added ``leads`` (a child run's chain of parent
    runs, charged with its spend); a version 4 record reads as one with none. ``output`` and
    ``output_retries`` (structured output) are optional additions of version 5: a record
    without them is a run without an output schema; so are ``loop_guard`` and ``tool_streak``
    (a record without them runs the default guards, with no streak yet); so is
    ``trace_context`` (a record without it resumes in the trace of whoever wakes it)."""

    schema_version: int = 5
    session_id: str
    run_id: str
    state: TurnState = "provisioning"
    step: int = 0
    turn_count: int = 0
    max_turns: int = 8
    provider: str
    model: str
    fallbacks: list[ModelRef] = Field(
        default_factory=list, description="models tried in order when a call fails over"
    )
    mode: Mode = "agent"
    principal: Principal | None = None
    agent: str | None = Field(default=None, description="the agent running the session now")
    parent: ParentLink | None = Field(
        default=None, description="a child run's parent call, told the outcome when it ends"
    )
    leads: list[Lead] = Field(
        default_factory=list,
        description="a child run's parent run, its parent's, ... (nearest first): the budgets "
        "of each are charged with this run's spend too",
    )
    system_prompt_override: str | None = None
    instructions: str | None = None
    system_prompt: str = ""
    tool_patterns: list[str] = Field(default_factory=list)
    initial_messages: list[AgentMessage] = Field(
        default_factory=list,
        description="the start request's messages, appended to the session by provisioning",
    )
    tools: list[ToolOffer] = Field(default_factory=list)
    context: ContextSettings | None = Field(
        default=None, description="the run's context budget settings (None: the worker's)"
    )
    last_assistant: AssistantMessage | None = Field(
        default=None, description="a child run's latest answer, told to its parent when it ends"
    )
    calls: list[CallState] = Field(default_factory=list)
    plan: list[str] | None = Field(
        default=None,
        description="planned mode: the function ids the run may call, fixed at provisioning",
    )
    external_calls: int = Field(
        default=0, description="calls of tools with external effects this run made (the cap)"
    )
    call_counts: dict[str, int] = Field(
        default_factory=dict, description="times each (function, arguments) was called"
    )
    usage: Usage = Field(default_factory=Usage)
    inbox_taken: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="inbox items the last steering_check appended; removed from the inbox after",
    )
    call_ids: list[str] = Field(
        default_factory=list, description="every function call id used in this run, in order"
    )
    output: OutputSpec | None = Field(
        default=None, description="the answer's schema, judged inside the turn (structured.py)"
    )
    output_retries: int = Field(
        default=0, description="corrective model calls made for answers that did not validate"
    )
    loop_guard: LoopGuard | None = Field(
        default=None, description="the run's loop guards (None: the defaults)"
    )
    tool_timeout: float | None = Field(
        default=None, description="the run's own limit on one tool call, in seconds"
    )
    tool_streak: ToolStreak | None = Field(
        default=None, description="the latest turns in a row that called only one tool"
    )
    trace_context: dict[str, str] | None = Field(
        default=None,
        exclude_if=lambda value: value is None,  # absent with tracing off: older readers read it
        description="the run's W3C trace context at its start: a wake after a pause (an "
        "approval, an abort, a restart) continues the run's trace",
    )
    stop_reason: str | None = None
    error: TurnError | None = None
    outbox: list[OutboxItem] = Field(
        default_factory=list,
        description="the effects of the step this record commits: applied after the commit, "
        "and again (idempotently) by a delivery that finds them here after a crash",
    )
    events_seq: int = Field(
        default=0,
        description="the session's agent::events sequence known before this step's own events; "
        "a replay of the outbox reads the stream from here to skip what is already there",
    )

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        data = renamed_before(data, 2, "message_id", "run_id")
        return upgrading(data, 5) or data

    @property
    def terminal(self) -> bool:
        return self.state in ("stopped", "failed")

    def entry_id(self, suffix: str) -> str:
        """A deterministic session entry id, so a re-run step never duplicates an entry.

        Suffixes hold provider call ids, which may contain anything: those that would break the
        session id rule (printable, no ``/``, ≤ 200 characters) are replaced by a digest.
        """
        entry = f"{self.run_id}-{suffix}"
        if len(entry) <= 200 and _ENTRY_ID.fullmatch(entry):
            return entry
        return f"{self.run_id}-h{hashlib.sha256(suffix.encode()).hexdigest()[:32]}"

    def tool(self, name: str) -> ToolOffer | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def call_payload(
        self, call: CallState, *, context_label: Label | None = None
    ) -> dict[str, Any]:
        """What ``call``'s function is triggered with: the model's arguments and, under
        ``_call``, the context of the call in this run (with the label of what the model had
        read, when it was not all trusted)."""
        context = CallContext(
            session_id=self.session_id,
            function_call_id=call.id,
            run_id=self.run_id,
            principal=self.principal,
            context_label=context_label,
        )
        return {**call.arguments, CALL_CONTEXT_KEY: context.model_dump()}

    def view(self) -> TurnStateView:
        return TurnStateView(
            session_id=self.session_id,
            run_id=self.run_id,
            state=self.state,
            step=self.step,
            turn_count=self.turn_count,
            max_turns=self.max_turns,
            stop_reason=self.stop_reason,
            error=self.error,
            awaiting_approval=[
                ParkedCall(
                    function_call_id=call.id,
                    function_id=call.function_id or call.tool_name,
                    arguments=call.arguments,
                )
                for call in self.calls
                if call.status == "parked"
            ],
            usage=self.usage,
            agent=self.agent,
        )
