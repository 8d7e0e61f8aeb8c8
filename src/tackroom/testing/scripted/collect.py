"""Read a provider stream the way an orchestrator does, and take it apart for assertions."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from tackroom.contracts.messages import AssistantMessage
from tackroom.contracts.provider import stream_function
from tackroom.engine.errors import ChannelAborted
from tackroom.engine.protocol import Engine

__all__ = ["CollectedStream", "collect_stream"]

_TERMINAL = frozenset({"done", "error"})


@dataclass(slots=True)
class CollectedStream:
    """Every frame a stream call sent, its result, and how the channel ended."""

    frames: list[dict[str, Any]] = field(default_factory=list)
    result: Any = None
    closed: bool = False
    """The channel ended normally (the writer closed it)."""
    aborted: str | None = None
    """The writer aborted the channel with this reason."""

    @property
    def types(self) -> list[str]:
        return [str(frame.get("type")) for frame in self.frames]

    @property
    def terminal(self) -> dict[str, Any] | None:
        """The last frame if it is ``done`` or ``error``."""
        if self.frames and self.frames[-1].get("type") in _TERMINAL:
            return self.frames[-1]
        return None

    @property
    def message(self) -> AssistantMessage | None:
        """The finished message of a ``done`` terminal frame."""
        terminal = self.terminal
        if terminal is None or terminal.get("type") != "done":
            return None
        return AssistantMessage.model_validate(terminal["message"])

    @property
    def error(self) -> dict[str, Any] | None:
        terminal = self.terminal
        return terminal if terminal is not None and terminal.get("type") == "error" else None

    def _joined(self, kind: str) -> str:
        return "".join(str(f["delta"]) for f in self.frames if f.get("type") == kind)

    @property
    def text(self) -> str:
        """The ``text_delta`` frames concatenated."""
        return self._joined("text_delta")

    @property
    def thinking(self) -> str:
        return self._joined("thinking_delta")

    def tool_calls(self) -> list[dict[str, Any]]:
        """``function_call_delta`` frames reassembled: ``[{index, id, name, arguments}]``, where
        ``arguments`` is the parsed JSON of the concatenated argument pieces."""
        calls: dict[int, dict[str, Any]] = {}
        for frame in self.frames:
            if frame.get("type") != "function_call_delta":
                continue
            call = calls.setdefault(
                int(frame["index"]), {"index": frame["index"], "id": None, "name": None, "raw": ""}
            )
            for key in ("id", "name"):
                if frame.get(key) is not None:
                    call[key] = frame[key]
            call["raw"] += frame.get("arguments_delta", "")
        out = []
        for index in sorted(calls):
            call = calls[index]
            raw = call.pop("raw")
            call["arguments"] = json.loads(raw) if raw else {}
            out.append(call)
        return out


async def collect_stream(
    engine: Engine,
    provider: str,
    request: BaseModel | Mapping[str, Any],
    *,
    timeout: float = 10.0,
    capacity: int = 64,
) -> CollectedStream:
    """Open a channel, call ``provider::<provider>::stream`` (or ``provider`` if it is a
    function id) with ``request`` and that channel as ``writer``, and read every frame.

    Errors of the call itself (``InvocationError``, ``InvocationTimeout``) propagate.
    """
    channel = await engine.open_channel(capacity=capacity)
    payload = request.model_dump(mode="json") if isinstance(request, BaseModel) else dict(request)
    payload["writer"] = channel.ref.to_json()
    function_id = provider if "::" in provider else stream_function(provider).id
    collected = CollectedStream()

    async def read() -> None:
        try:
            async for frame in channel:
                collected.frames.append(frame)
        except ChannelAborted as exc:
            collected.aborted = exc.reason
        else:
            collected.closed = True

    reader = asyncio.create_task(read(), name=f"collect {function_id}")
    try:
        collected.result = await engine.trigger(function_id, payload, timeout=timeout)
        await asyncio.wait_for(asyncio.shield(reader), timeout)
    finally:
        if not reader.done():
            reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        await channel.aclose()
    return collected
