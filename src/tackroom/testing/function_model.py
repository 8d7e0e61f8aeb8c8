"""``FunctionModel``: a model whose answers come from a Python function — for tests and demos.

    def answer(messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall | list[ModelChunk]:
        if not any(m.role == "function_result" for m in messages):
            return ToolCall("add", {"a": 2, "b": 3})
        return "5"

    harness = Harness(FunctionModel(answer))

The function sees the whole request (the transcript, the offered tools, the system prompt), so a
test can answer from what the model was actually sent; it may be sync or async. Its answer is
streamed like a real provider's (text in word-sized deltas), through the same gate, budget and
events.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tackroom.contracts.messages import AgentMessage
from tackroom.contracts.provider import ProviderRequest, ToolSpec
from tackroom.contracts.turn import PLAN_FORMAT
from tackroom.harness.models import ModelChunk, ToolCall

__all__ = ["FunctionModel", "ModelInfo"]

Answer = str | ToolCall | Sequence[ModelChunk]
AnswerFunction = Callable[[list[AgentMessage], "ModelInfo"], Answer | Awaitable[Answer]]

_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the model was asked besides the transcript."""

    model: str
    system_prompt: str
    tools: list[ToolSpec] = field(default_factory=list)
    session_id: str | None = None
    output_format: str | None = None
    """The name of the output format asked for, if any (``tool_plan``: a planned run's planning
    call, :data:`tackroom.contracts.turn.PLAN_FORMAT`)."""

    @property
    def planning(self) -> bool:
        """Is this a planned run's planning call (answer ``{"tools": [names]}``)?"""
        return self.output_format == PLAN_FORMAT

    def tool(self, name: str) -> ToolSpec | None:
        return next((tool for tool in self.tools if tool.name == name), None)


class FunctionModel:
    """A :class:`~tackroom.harness.models.StreamingModel` answering with ``function``."""

    def __init__(
        self, function: AnswerFunction, *, name: str = "function", model: str = "function"
    ) -> None:
        self.function = function
        self.name = name
        self.model = model
        self.requests: list[ProviderRequest] = []

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ModelChunk]:
        self.requests.append(request)
        info = ModelInfo(
            model=request.model,
            system_prompt=request.system_prompt,
            tools=list(request.tools),
            session_id=request.session_id,
            output_format=None if request.output_format is None else request.output_format.name,
        )
        answer = self.function(list(request.messages), info)
        if inspect.isawaitable(answer):
            answer = await answer
        for chunk in _chunks(answer):
            yield chunk


def _chunks(answer: Answer) -> list[ModelChunk]:
    if isinstance(answer, str):
        return list(_WORDS.findall(answer)) or [answer]
    if isinstance(answer, ToolCall):
        return [answer]
    chunks: list[ModelChunk] = []
    for piece in answer:
        chunks.extend(_WORDS.findall(piece) if isinstance(piece, str) else [piece])
    return chunks
