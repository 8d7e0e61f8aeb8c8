"""What a run hands back: :class:`RunResult`, and the pending approvals a program decides.

A result is folded from the run's events (:class:`RunCollector`), so it costs no extra round
trip: the assistant messages from ``message_complete``, tool results from ``turn_end``, usage and
the end state from ``agent_end``, and the reason from the ``error`` event when the run failed.
``Harness.run`` folds the stored JSON frames directly (:meth:`RunCollector.add_frame`) and the
result types its messages when they are first read, so a program that only wants ``output``
never pays for parsing the transcript.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from tackroom.contracts import approvals
from tackroom.contracts.events import (
    AgentEnd,
    AgentError,
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    MessageComplete,
    TurnEnd,
)
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    Usage,
    UserMessage,
    message_adapter,
    text_of,
)

__all__ = ["AgentResult", "PendingApproval", "RunCollector", "RunResult"]

OutputT = TypeVar("OutputT")

MessagePart = AgentMessage | dict[str, Any]
"""A message as a model, or as the JSON it was stored as (typed on first read)."""


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call parked until a person (or a program) decides it."""

    session_id: str
    run_id: str
    function_call_id: str
    function_id: str
    arguments: dict[str, Any]
    reason: str = ""

    @classmethod
    def of(cls, event: ApprovalRequested) -> PendingApproval:
        data = event.data
        return cls(
            session_id=event.session_id,
            run_id=event.run_id,
            function_call_id=data.function_call_id,
            function_id=data.function_id,
            arguments=data.arguments,
            reason=data.reason,
        )

    @classmethod
    def of_record(cls, record: approvals.PendingApproval) -> PendingApproval:
        """The approvals worker's record of a parked call (``approval::list_pending``)."""
        return cls(
            session_id=record.session_id,
            run_id=record.run_id or "",
            function_call_id=record.function_call_id,
            function_id=record.function_id,
            arguments=record.arguments,
            reason=record.reason,
        )


@dataclass(kw_only=True)
class RunResult(Generic[OutputT]):
    """One run's outcome.

    ``output`` is the final answer's text, or — with ``output_type`` — the validated instance.
    ``stop_reason`` is ``"end"`` when the run finished normally; ``"awaiting_approval"`` when it
    returned with calls in :attr:`pending` (decide them with ``harness.approvals``, then
    ``Harness.wait``); otherwise why it stopped (``error``, ``max_turns``, ``loop``, ``aborted``,
    ``budget_exceeded``) with :attr:`error` saying it in words. :attr:`messages` are this run's
    messages: the prompt, the assistant messages and the tool results.
    """

    output: OutputT
    session_id: str
    run_id: str
    state: str
    stop_reason: str | None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    pending: list[PendingApproval] = field(default_factory=list)
    agent: str | None = None
    """The agent that finished the run: after a handoff, the one handed to (``None``: the
    harness's own agent)."""
    output_retries: int = 0
    """Corrective model calls the run made (inside its turn) for an answer that validates
    against ``output_type``."""
    parts: list[MessagePart] = field(default_factory=list, repr=False)
    """The messages as collected (models or stored JSON); read :attr:`messages` instead."""

    @property
    def messages(self) -> list[AgentMessage]:
        """This run's messages, typed (the stored JSON is parsed once, on first read)."""
        if any(not isinstance(part, BaseModel) for part in self.parts):
            self.parts = [_typed(part) for part in self.parts]
        return [part for part in self.parts if not isinstance(part, dict)]

    @messages.setter
    def messages(self, messages: list[AgentMessage]) -> None:
        self.parts = list(messages)

    @property
    def cost_usd(self) -> float:
        return self.usage.cost_usd

    @property
    def ok(self) -> bool:
        return self.state == "stopped" and self.stop_reason == "end"

    @property
    def text(self) -> str:
        """The last assistant message's text."""
        for part in reversed(self.parts):
            if isinstance(part, AssistantMessage):
                return text_of(part.content)
            if isinstance(part, dict) and part.get("role") == "assistant":
                return _text_of_json(part)
        return ""


def _typed(part: MessagePart) -> AgentMessage:
    return message_adapter.validate_python(part) if isinstance(part, dict) else part


def _text_of_json(message: dict[str, Any]) -> str:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return "".join(
        str(block.get("text", ""))
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text"
    )


class RunCollector:
    """Folds one run's events into what its :class:`RunResult` reports."""

    FOLDED = frozenset(
        {"message_complete", "turn_end", "approval_requested", "approval_resolved", "error"}
        | {"agent_end"}
    )
    """The event types the result is folded from; every other is ignored."""

    def __init__(self, *, session_id: str, run_id: str, prompt: UserMessage | None) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.parts: list[MessagePart] = [prompt] if prompt is not None else []
        self.pending: dict[str, PendingApproval] = {}
        self.ended = False
        self.state = "function_awaiting_approval"
        self.stop_reason: str | None = "awaiting_approval"
        self.usage = Usage()
        self.error: str | None = None
        self.agent: str | None = None
        self.output_retries = 0

    def add(self, event: AgentEvent) -> None:
        """Fold a typed event (what ``Harness.stream`` hands out)."""
        if isinstance(event, MessageComplete):
            message = event.data.message
            if not isinstance(message, CustomMessage) or message.display:
                self.parts.append(message)
        elif isinstance(event, TurnEnd):
            self.parts.extend(event.data.function_results)
        elif isinstance(event, ApprovalRequested):
            self._requested(event)
        elif isinstance(event, ApprovalResolved):
            self.pending.pop(event.data.function_call_id, None)
        elif isinstance(event, AgentError):
            self.error = event.data.message
        elif isinstance(event, AgentEnd):
            data = event.data
            error = data.error.message if data.error is not None else None
            self._end(data.state, data.stop_reason, data.usage, error)
            self.agent = data.agent
            self.output_retries = data.output_retries

    def add_frame(self, frame: dict[str, Any], parse: Any) -> None:
        """Fold a stored event without typing it where the result need not (messages stay
        JSON until read); ``parse`` types the rare frame that must be (an approval)."""
        kind, data = frame.get("type"), frame.get("data")
        if not isinstance(data, dict):
            return
        if kind == "message_complete":
            message = data.get("message")
            if isinstance(message, dict) and not (
                message.get("role") == "custom" and message.get("display") is False
            ):
                self.parts.append(message)
        elif kind == "turn_end":
            results = data.get("function_results")
            self.parts.extend(r for r in results or () if isinstance(r, dict))
        elif kind == "agent_end":
            error = data.get("error")
            self._end(
                str(data.get("state")),
                data.get("stop_reason"),
                Usage.model_validate(data.get("usage") or {}),
                error.get("message") if isinstance(error, dict) else None,
            )
            agent = data.get("agent")
            self.agent = agent if isinstance(agent, str) else None
            retries = data.get("output_retries")
            self.output_retries = retries if isinstance(retries, int) else 0
        elif kind == "error":
            self.error = str(data.get("message"))
        elif kind in ("approval_requested", "approval_resolved"):
            self.add(parse(frame))

    def _requested(self, event: ApprovalRequested) -> None:
        self.pending[event.data.function_call_id] = PendingApproval.of(event)

    def _end(self, state: str, stop_reason: str | None, usage: Usage, error: str | None) -> None:
        self.ended = True
        self.state, self.stop_reason, self.usage = state, stop_reason, usage
        if error is not None:
            self.error = error

    def result(self) -> RunResult[str]:
        normal = self.ended and self.state == "stopped" and self.stop_reason == "end"
        result: RunResult[str] = RunResult(
            output="",
            session_id=self.session_id,
            run_id=self.run_id,
            state=self.state,
            stop_reason=self.stop_reason,
            usage=self.usage,
            error=None if normal else self.error,
            pending=[] if self.ended else list(self.pending.values()),
            agent=self.agent,
            output_retries=self.output_retries,
            parts=list(self.parts),
        )
        result.output = result.text
        return result


AgentResult = RunResult
"""Seed 003's name for :class:`RunResult` (``Harness.run(...) -> AgentResult``)."""
