"""What a run hands back: :class:`RunResult`, and the pending approvals a program decides.

A result is folded from the run's typed events (:class:`RunCollector`), so it costs no extra
round trip: the assistant messages from ``message_complete``, tool results from ``turn_end``,
usage and the end state from ``agent_end``, and the reason from the ``error`` event when the run
failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

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
    text_of,
)

__all__ = ["PendingApproval", "RunCollector", "RunResult"]

OutputT = TypeVar("OutputT")


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call parked until a person (or a program) decides it."""

    session_id: str
    run_id: str
    function_call_id: str
    function_id: str
    arguments: dict[str, Any]
    reason: str = ""


@dataclass(slots=True, kw_only=True)
class RunResult(Generic[OutputT]):
    """One run's outcome.

    ``output`` is the final answer's text, or — with ``output_type`` — the validated instance.
    ``stop_reason`` is ``"end"`` when the run finished normally; ``"awaiting_approval"`` when it
    returned with calls in :attr:`pending` (decide them with ``Harness.approve``/``deny``, then
    ``Harness.wait``); otherwise why it stopped (``error``, ``max_turns``, ``loop``, ``aborted``,
    ``budget_exceeded``) with :attr:`error` saying it in words.
    """

    output: OutputT
    session_id: str
    run_id: str
    state: str
    stop_reason: str | None
    messages: list[AgentMessage] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    pending: list[PendingApproval] = field(default_factory=list)
    output_retries: int = 0
    """Corrective retries spent to get an answer that validates against ``output_type``."""

    @property
    def cost_usd(self) -> float:
        return self.usage.cost_usd

    @property
    def ok(self) -> bool:
        return self.state == "stopped" and self.stop_reason == "end"

    @property
    def text(self) -> str:
        """The last assistant message's text."""
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                return text_of(message.content)
        return ""


class RunCollector:
    """Folds one run's events into what its :class:`RunResult` reports."""

    FOLDED = frozenset(
        {"message_complete", "turn_end", "approval_requested", "approval_resolved", "error"}
        | {"agent_end"}
    )
    """The event types :meth:`add` reads; it ignores every other."""

    def __init__(self, *, session_id: str, run_id: str, prompt: UserMessage | None) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.messages: list[AgentMessage] = [prompt] if prompt is not None else []
        self.pending: dict[str, PendingApproval] = {}
        self.end: AgentEnd | None = None
        self.error: str | None = None

    def add(self, event: AgentEvent) -> None:
        if isinstance(event, MessageComplete):
            message = event.data.message
            if not isinstance(message, CustomMessage) or message.display:
                self.messages.append(message)
        elif isinstance(event, TurnEnd):
            self.messages.extend(event.data.function_results)
        elif isinstance(event, ApprovalRequested):
            data = event.data
            self.pending[data.function_call_id] = PendingApproval(
                session_id=event.session_id,
                run_id=event.run_id,
                function_call_id=data.function_call_id,
                function_id=data.function_id,
                arguments=data.arguments,
                reason=data.reason,
            )
        elif isinstance(event, ApprovalResolved):
            self.pending.pop(event.data.function_call_id, None)
        elif isinstance(event, AgentError):
            self.error = event.data.message
        elif isinstance(event, AgentEnd):
            self.end = event
            if event.data.error is not None:
                self.error = event.data.error.message

    def result(self) -> RunResult[str]:
        end = self.end
        state = end.data.state if end is not None else "function_awaiting_approval"
        stop = end.data.stop_reason if end is not None else "awaiting_approval"
        normal = end is not None and state == "stopped" and stop == "end"
        result = RunResult[str](
            output="",
            session_id=self.session_id,
            run_id=self.run_id,
            state=state,
            stop_reason=stop,
            messages=list(self.messages),
            usage=end.data.usage if end is not None else Usage(),
            error=None if normal else self.error,
            pending=list(self.pending.values()) if end is None else [],
        )
        result.output = result.text
        return result
