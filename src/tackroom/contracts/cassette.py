"""A cassette: one finished run as a replay needs it, derived from what the harness stores.

Nothing records a cassette while a run goes: it is read afterwards from the session tree (the
messages, with their timestamps), the turn record (provider, model, the system prompt and the
tool schemas the model was offered), ``agent::events`` (the streamed deltas, gate, approval and
budget decisions) and the call ledger (each call's result and duration). A replay serves the
recorded answers under the same function ids the run used — the provider's stream function and
every tool — so the real orchestrator drives the turn again with no provider and no side effect.

The clock a run used is in it too: every message keeps its ``timestamp`` and every call its
``duration_ms``; a replay hands both back, so its messages are the recorded ones byte for byte.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.messages import AgentMessage, AssistantMessage, FunctionResultMessage, Usage
from tackroom.contracts.principal import Principal
from tackroom.contracts.provider import ToolSpec
from tackroom.contracts.tools import TRAITS_KEY, OfferedTool

__all__ = [
    "SCHEMA_VERSION",
    "ApprovalRecord",
    "BudgetRecord",
    "Cassette",
    "CassetteEntry",
    "CassetteTool",
    "Divergence",
    "GateRecord",
    "ModelExchange",
    "ReplayReport",
    "StreamChunk",
    "ToolExchange",
]

SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CassetteTool(OfferedTool):
    """A function offered to the model, as the run offered it (name, schema, traits)."""

    def spec(self) -> ToolSpec:
        """What the provider was sent for this tool (``x-`` keys are the harness's own)."""
        parameters = {k: v for k, v in self.parameters.items() if not k.startswith("x-")}
        return ToolSpec(name=self.name, description=self.description, parameters=parameters)

    def request_schema(self, *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        """The schema to register the function under again, without the traits in ``drop``."""
        schema = dict(self.parameters)
        traits = schema.get(TRAITS_KEY)
        if isinstance(traits, dict) and drop:
            schema[TRAITS_KEY] = {k: v for k, v in traits.items() if k not in drop}
        return schema


class CassetteEntry(_Model):
    """One session entry: its id (result clipping notes name it) and its message."""

    entry_id: str
    message: AgentMessage


class StreamChunk(_Model):
    """A piece of a streamed answer, as ``agent::events`` kept it (consecutive deltas of one
    kind coalesced)."""

    kind: Literal["text", "thinking", "function_call"]
    delta: str


class ModelExchange(_Model):
    """One model call: the request it answered and the answer, streamed then whole."""

    turn: int = Field(ge=1)
    context: int = Field(
        ge=0,
        description="entries of history + messages the request carried (all before the answer)",
    )
    chunks: list[StreamChunk] = Field(default_factory=list)
    response: AssistantMessage


class GateRecord(_Model):
    decision: Literal["allow", "deny", "needs_approval"]
    decided_by: str
    rule_id: str | None = None
    reason: str = ""
    principal: str | None = None


class ApprovalRecord(_Model):
    decision: str
    approver: str | None = None
    reason: str | None = None
    decided_at: float | None = None


class BudgetRecord(_Model):
    turn: int
    allowed: bool
    estimate_usd: float = 0.0
    reason: str | None = None


class ToolExchange(_Model):
    """One function call of the run and what it got: its result (whatever decided it — the
    function, a denial, an approval), the gate's decision and how long it took."""

    call_id: str
    tool_name: str
    function_id: str | None
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: FunctionResultMessage
    ran: bool = Field(description="the function was invoked (the ledger has it)")
    duration_ms: float | None = None
    gate: GateRecord | None = None
    approval: ApprovalRecord | None = None


class Cassette(_Model):
    """A finished run, ready to replay (``tackroom replay``) or to script a test with."""

    schema_version: int = SCHEMA_VERSION
    session_id: str
    run_id: str
    provider: str
    model: str
    mode: str = "agent"
    max_turns: int
    principal: Principal | None = None
    system_prompt: str
    tools: list[CassetteTool] = Field(default_factory=list)
    history: list[CassetteEntry] = Field(
        default_factory=list, description="the session's path before the run"
    )
    inputs: list[AgentMessage] = Field(
        default_factory=list, description="the messages the run was started with"
    )
    messages: list[CassetteEntry] = Field(
        default_factory=list, description="what the run appended to the session, in order"
    )
    exchanges: list[ModelExchange] = Field(default_factory=list)
    tool_calls: list[ToolExchange] = Field(default_factory=list)
    budget: list[BudgetRecord] = Field(default_factory=list)
    state: Literal["stopped", "failed"]
    stop_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)

    def transcript(self) -> list[AgentMessage]:
        """The session's messages once the run ended: history, then the run's own."""
        return [entry.message for entry in (*self.history, *self.messages)]

    def steered(self, turn: int) -> list[AgentMessage]:
        """The inbox messages (steering, follow-up) the run took after model call ``turn``, as
        the orchestrator appended them (``<run>-t<turn>-in<i>``)."""
        by_id = {entry.entry_id: entry.message for entry in self.messages}
        taken: list[AgentMessage] = []
        while (message := by_id.get(f"{self.run_id}-t{turn}-in{len(taken)}")) is not None:
            taken.append(message)
        return taken

    def call(self, call_id: str) -> ToolExchange | None:
        return next((call for call in self.tool_calls if call.call_id == call_id), None)


class Divergence(_Model):
    """Where a replay first differs from the recording."""

    where: Literal["request", "messages", "outcome"]
    turn: int | None = Field(default=None, description="the model call (1-based), for a request")
    message_index: int | None = Field(
        default=None, description="the message (0-based, in the request or the session)"
    )
    field: str = Field(description="the path of the first differing field, e.g. content[0].text")
    recorded: str
    replayed: str

    def describe(self) -> str:
        """One readable block: where, which field, the two values."""
        if self.where == "request":
            head = f"model call {self.turn}: the request differs"
        elif self.where == "messages":
            head = "the session's messages differ"
        else:
            head = "the run ended differently"
        at = f" at message {self.message_index}" if self.message_index is not None else ""
        return (
            f"{head}{at}, field {self.field}\n"
            f"  recorded: {self.recorded}\n"
            f"  replayed: {self.replayed}"
        )


class ReplayReport(_Model):
    schema_version: int = SCHEMA_VERSION
    session_id: str
    run_id: str
    identical: bool
    divergence: Divergence | None = None
    live_model: str | None = None
    model_calls: int = Field(description="model calls the replay made")
    tool_calls: int = Field(description="tool calls the cassette answered")
    messages: int = Field(description="messages the replayed session holds")
    final_text: str = Field(default="", description="the replayed run's last answer, as text")
    seconds: float
