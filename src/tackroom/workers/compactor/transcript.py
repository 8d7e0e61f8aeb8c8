"""What the summariser reads: the replaced entries as plain text, in chunks that fit."""

from __future__ import annotations

import json
from collections.abc import Sequence

from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    FunctionResultMessage,
    UserMessage,
    text_of,
)

__all__ = ["chunks", "render"]

_ARGUMENT_CHARS = 500
_RESULT_CHARS = 1_500


def render(message: AgentMessage) -> str:
    """One entry as a line or two of transcript ("" for what the model never read)."""
    match message:
        case UserMessage():
            return f"User: {text_of(message.content).strip()}"
        case AssistantMessage() if message.stop_reason != "error":
            lines = []
            if text := text_of(message.content).strip():
                lines.append(f"Assistant: {text}")
            for call in message.function_calls():
                arguments = json.dumps(call.arguments, ensure_ascii=False)
                lines.append(
                    f"Assistant called {call.tool_name}({_cut(arguments, _ARGUMENT_CHARS)})"
                )
            return "\n".join(lines)
        case FunctionResultMessage():
            status = "error" if message.is_error else "result"
            text = _cut(text_of(list(message.content)).strip(), _RESULT_CHARS)
            return f"Tool {status} ({message.function_id}): {text}"
        case CustomMessage() if message.display:
            return f"Note ({message.custom_type}): {text_of(message.content).strip()}"
    return ""


def chunks(messages: Sequence[AgentMessage], *, max_chars: int) -> list[str]:
    """The rendered transcript cut between entries into pieces of at most ``max_chars`` (an
    entry longer than that alone is cut to fit)."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for message in messages:
        line = _cut(render(message), max_chars)
        if not line:
            continue
        if current and size + len(line) + 1 > max_chars:
            pieces.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        pieces.append("\n".join(current))
    return pieces


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"
