"""Turn a script turn into typed provider stream frames and its finished message, once.

Frames are built when the provider is created, not per call: a call only adds the ``start``
and terminal frames (:func:`tackroom.kit.providers.streaming.serve_stream`), the model name and
the timestamp.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

from tackroom.contracts.messages import (
    AssistantMessage,
    ContentBlock,
    FunctionCallBlock,
    TextBlock,
    ThinkingBlock,
    Usage,
)
from tackroom.contracts.provider import (
    FunctionCallDelta,
    ProviderEvent,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    UsageEvent,
)
from tackroom.testing.scripted.script import Chunking, ScriptTurn

__all__ = ["CompiledTurn", "chunk", "compile_turn", "finished_message"]

_WORD_BOUNDARY = re.compile(r"(?<=\s)(?=\S)")


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
    frames: tuple[ProviderEvent, ...]
    message: AssistantMessage
    """The finished message, without ``model`` and ``timestamp``."""


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
    frames: list[ProviderEvent] = []
    content: list[ContentBlock] = []
    if turn.thinking:
        pieces = chunk(turn.thinking, text_how)
        frames.extend(ThinkingDelta(delta=piece) for piece in pieces[:-1])
        frames.append(ThinkingDelta(delta=pieces[-1], signature=turn.thinking_signature))
        content.append(ThinkingBlock(text=turn.thinking, signature=turn.thinking_signature))
    if turn.text:
        frames.extend(TextDelta(delta=piece) for piece in chunk(turn.text, text_how))
        content.append(TextBlock(text=turn.text))
    for index, call in enumerate(turn.tool_calls):
        call_id = call.id or f"call_{step}_{index}"
        frames.append(FunctionCallDelta(index=index, id=call_id, name=call.name))
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        frames.extend(
            FunctionCallDelta(index=index, arguments_delta=piece)
            for piece in chunk(arguments, args_how)
        )
        content.append(FunctionCallBlock(id=call_id, tool_name=call.name, arguments=call.arguments))
    usage = turn.usage or Usage()
    frames.append(UsageEvent(usage=usage))
    failure = turn.error
    if failure is None:
        frames.append(StopEvent(stop_reason=turn.effective_stop_reason))
    message = AssistantMessage(
        content=content,
        stop_reason=turn.effective_stop_reason,
        error_message=None if failure is None else failure.message,
        error_kind=None if failure is None else failure.kind,
        usage=usage,
        provider=provider,
        timestamp=0.0,
    )
    return CompiledTurn(turn=turn, step=step, frames=tuple(frames), message=message)


def finished_message(compiled: CompiledTurn, model: str) -> AssistantMessage:
    """The turn's message for one call."""
    return compiled.message.model_copy(update={"model": model, "timestamp": time.time()})
