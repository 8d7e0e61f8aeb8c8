"""The first difference between a recording and a replay, said so a person can read it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pydantic_core

from tackroom.contracts.cassette import Divergence
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, TextBlock
from tackroom.contracts.provider import ProviderRequest, ToolSpec

__all__ = ["first_difference", "message_divergence", "request_divergence", "shown"]

_CONTEXT = 40
_CLIP_NOTE_AFTER = 1_000
"""A result longer than this may reach the model clipped (the orchestrator's least limit)."""


def shown(value: Any, *, at: int | None = None) -> str:
    """``value`` as JSON on one line; a long string around index ``at`` only."""
    if isinstance(value, str) and at is not None and len(value) > 2 * _CONTEXT + 20:
        start, end = max(0, at - _CONTEXT), at + _CONTEXT
        text = json.dumps(value[start:end], ensure_ascii=False)
        line = value.count("\n", 0, at) + 1
        column = at - (value.rfind("\n", 0, at) + 1) + 1
        where = f"line {line}, column {column}"
        return f"{'…' if start else ''}{text}{'…' if end < len(value) else ''} ({where})"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 240 else text[:240] + "…"


def first_difference(recorded: Any, replayed: Any, path: str = "") -> tuple[str, str, str] | None:
    """``(field path, recorded, replayed)`` of the first place two JSON values differ."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in [*recorded, *(k for k in replayed if k not in recorded)]:
            if key not in recorded or key not in replayed:
                return (
                    _join(path, key),
                    shown(recorded[key]) if key in recorded else "(absent)",
                    shown(replayed[key]) if key in replayed else "(absent)",
                )
            found = first_difference(recorded[key], replayed[key], _join(path, key))
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(replayed, list):
        for index, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
        if len(recorded) != len(replayed):
            index = min(len(recorded), len(replayed))
            return (
                f"{path}[{index}]",
                shown(recorded[index]) if index < len(recorded) else "(none)",
                shown(replayed[index]) if index < len(replayed) else "(none)",
            )
        return None
    if recorded == replayed and type(recorded) is type(replayed):
        return None
    if isinstance(recorded, str) and isinstance(replayed, str):
        at = next(
            (i for i, (a, b) in enumerate(zip(recorded, replayed, strict=False)) if a != b),
            min(len(recorded), len(replayed)),
        )
        return path or "(value)", shown(recorded, at=at), shown(replayed, at=at)
    return path or "(value)", shown(recorded), shown(replayed)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def request_divergence(
    *,
    turn: int,
    request: ProviderRequest,
    model: str,
    system_prompt: str,
    tools: Sequence[ToolSpec],
    messages: Sequence[AgentMessage],
    verified: int = 0,
) -> Divergence | None:
    """How the ``turn``-th model request differs from the one recorded, if it does.

    ``verified``: how many of its first messages an earlier request carried and matched; a
    session's path within a run only grows, so they are not compared again.
    """
    offered: tuple[str, Any, Any] = ("tools", tools, request.tools)
    if _same_json(tools, request.tools):  # the common case: no schema walked
        offered = ("tools", [], [])
    for name, recorded, replayed in (
        ("model", model, request.model),
        ("system_prompt", system_prompt, request.system_prompt),
        (offered[0], _dump(offered[1]), _dump(offered[2])),
    ):
        found = first_difference(recorded, replayed, name)
        if found is not None:
            return Divergence(
                where="request", turn=turn, field=found[0], recorded=found[1], replayed=found[2]
            )
    if len(request.messages) == len(messages) and all(
        new == old
        for new, old in zip(request.messages[verified:], messages[verified:], strict=True)
    ):
        return None  # the common case, without dumping a transcript per call
    recorded_messages = [_visible(m, None) for m in messages]
    replayed_messages = [
        _visible(m, messages[i] if i < len(messages) else None)
        for i, m in enumerate(request.messages)
    ]
    found = first_difference(recorded_messages, replayed_messages)
    if found is None:
        return None
    index = found[0].partition("]")[0]
    return Divergence(
        where="request",
        turn=turn,
        message_index=int(index.lstrip("[")),
        field=f"messages{found[0]}",
        recorded=found[1],
        replayed=found[2],
    )


def message_divergence(
    recorded: Sequence[AgentMessage], replayed: Sequence[AgentMessage], *, live: bool = False
) -> Divergence | None:
    """The first difference between the recorded session and the replayed one, byte for byte;
    ``live``: what another model may say differently and still say the same is left out (its
    clock, usage, name and the ids it gives calls)."""
    if not live and _same_json(recorded, replayed):
        return None  # byte for byte, as one comparison of their JSON
    view = _live_view if live else _dump
    found = first_difference(view(recorded), view(replayed))
    if found is None:
        return None
    index, _, field = found[0].partition("]")
    return Divergence(
        where="messages",
        message_index=int(index.lstrip("[")),
        field=field.lstrip(".") or "(message)",
        recorded=found[1],
        replayed=found[2],
    )


def _same_json(recorded: Sequence[Any], replayed: Sequence[Any]) -> bool:
    """Whether two lists of models have the same JSON text (types included: 1 is not 1.0)."""
    return bool(pydantic_core.to_json(list(recorded)) == pydantic_core.to_json(list(replayed)))


def _dump(items: Sequence[Any]) -> list[Any]:
    return [item.model_dump(mode="json") for item in items]


_LIVE_NOISE = frozenset({"timestamp", "usage", "provider", "model"})


def _live_view(messages: Sequence[AgentMessage]) -> list[Any]:
    ids: dict[str, str] = {}

    def label(call_id: str) -> str:
        return ids.setdefault(call_id, f"call#{len(ids) + 1}")

    view = []
    for data in _dump(messages):
        data = {k: v for k, v in data.items() if k not in _LIVE_NOISE}
        if "function_call_id" in data:
            data["function_call_id"] = label(data["function_call_id"])
        for block in data.get("content") or []:
            if block.get("type") == "function_call":
                block["id"] = label(block["id"])
            elif block.get("type") == "function_result":
                block["function_call_id"] = label(block["function_call_id"])
        view.append(data)
    return view


def _visible(message: AgentMessage, recorded: AgentMessage | None) -> Any:
    """A message as the provider reads it. A long result the model got clipped (the session has
    it whole) counts as the recorded one when the clipped text begins like it."""
    data = message.model_dump(mode="json")
    if isinstance(message, FunctionResultMessage) and isinstance(recorded, FunctionResultMessage):
        whole = "".join(b.text for b in recorded.content if isinstance(b, TextBlock))
        head = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        if len(whole) > _CLIP_NOTE_AFTER and head != whole and head.startswith(whole[:200]):
            data["content"] = recorded.model_dump(mode="json")["content"]
            data["details"] = recorded.details
    return data
