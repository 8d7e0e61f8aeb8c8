"""Turn a script turn into provider stream frames, once, as plain JSON dicts.

Frames are built when the provider is created, not per call: a call only adds the ``start``
frame, the model name and the timestamp. The channel copies every frame it carries, so the
shared dicts are never mutated by a reader.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.messages import (
    AssistantMessage,
    FunctionCallBlock,
    TextBlock,
    ThinkingBlock,
    Usage,
)
from tackroom.testing.scripted.script import Chunking, ScriptTurn

__all__ = [
    "CompiledTurn",
    "chunk",
    "compile_turn",
    "done_frame",
    "error_frame",
    "error_message",
    "finished_message",
    "start_frame",
]

_WORD_BOUNDARY = re.compile(r"(?<=\s)(?=\S)")

Frame = dict[str, Any]


def chunk(text: str, how: Chunking) -> list[str]:
    """Cut ``text`` into deltas whose concatenation is ``text`` (no empty piece)."""
    if not text:
        return []
    if how == "whole":
        return [text]
    if how == "words":
        return [piece for piece in _WORD_BOUNDARY.split(text) if piece]
    count = min(how, len(text))
    size, extra = divmod(len(text), count)
    pieces, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


@dataclass(frozen=True, slots=True)
class CompiledTurn:
    """A turn ready to replay: its frames between ``start`` and the terminal one."""

    turn: ScriptTurn
    step: int
    frames: tuple[Frame, ...]
    message: Frame
    """The finished ``AssistantMessage`` as JSON, without ``model`` and ``timestamp``."""


def compile_turn(
    turn: ScriptTurn,
    *,
    step: int,
    provider: str,
    deltas: Chunking,
    argument_deltas: Chunking,
) -> CompiledTurn:
    text_how = turn.deltas if turn.deltas is not None else deltas
    args_how = turn.argument_deltas if turn.argument_deltas is not None else argument_deltas
    frames: list[Frame] = []
    content: list[Any] = []
    if turn.thinking:
        pieces = chunk(turn.thinking, text_how)
        for piece in pieces:
            frames.append({"type": "thinking_delta", "delta": piece})
        if turn.thinking_signature is not None:
            frames[-1]["signature"] = turn.thinking_signature
        content.append(ThinkingBlock(text=turn.thinking, signature=turn.thinking_signature))
    if turn.text:
        pieces = chunk(turn.text, text_how)
        frames.extend({"type": "text_delta", "delta": piece} for piece in pieces)
        content.append(TextBlock(text=turn.text))
    for index, call in enumerate(turn.tool_calls):
        call_id = call.id or f"call_{step}_{index}"
        frames.append(
            {
                "type": "function_call_delta",
                "index": index,
                "id": call_id,
                "name": call.name,
                "arguments_delta": "",
            }
        )
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        frames.extend(
            {"type": "function_call_delta", "index": index, "arguments_delta": piece}
            for piece in chunk(arguments, args_how)
        )
        content.append(FunctionCallBlock(id=call_id, tool_name=call.name, arguments=call.arguments))
    usage = turn.usage or Usage()
    frames.append({"type": "usage", "usage": usage.model_dump(mode="json")})
    failure = turn.error
    if failure is None:
        frames.append({"type": "stop", "stop_reason": turn.effective_stop_reason})
    message = AssistantMessage(
        content=content,
        stop_reason=turn.effective_stop_reason,
        error_message=None if failure is None else failure.message,
        error_kind=None if failure is None else failure.kind,
        usage=usage,
        provider=provider,
        timestamp=0.0,
    ).model_dump(mode="json")
    return CompiledTurn(turn=turn, step=step, frames=tuple(frames), message=message)


def start_frame(provider: str, model: str) -> Frame:
    return {"type": "start", "provider": provider, "model": model}


def finished_message(compiled: CompiledTurn, model: str) -> Frame:
    """The turn's ``AssistantMessage`` JSON for one call."""
    return {**compiled.message, "model": model, "timestamp": time.time()}


def done_frame(compiled: CompiledTurn, model: str) -> Frame:
    return {"type": "done", "message": finished_message(compiled, model)}


def error_frame(kind: str, message: str, retry_after: float | None = None) -> Frame:
    return {"type": "error", "kind": kind, "message": message, "retry_after": retry_after}


def error_message(*, provider: str, model: str, kind: str, message: str) -> Frame:
    """An ``AssistantMessage`` JSON that ended in an error (what ``complete`` returns)."""
    return AssistantMessage.model_validate(
        {
            "stop_reason": "error",
            "error_kind": kind,
            "error_message": message,
            "provider": provider,
            "model": model,
        }
    ).model_dump(mode="json")
