"""Requests for the scripted provider tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tackroom.contracts.messages import FunctionResultMessage, TextBlock, UserMessage
from tackroom.contracts.provider import ProviderRequest, ToolSpec, tool_name_for

__all__ = ["request"]


def request(
    text: str = "hello",
    *,
    session_id: str | None = "s-1",
    model: str = "test-model",
    tools: Sequence[str] = (),
    results_for: Sequence[str] = (),
    **extra: Any,
) -> ProviderRequest:
    messages: list[Any] = [UserMessage.text(text)]
    messages += [
        FunctionResultMessage(
            function_call_id=call_id, function_id="fs::read", content=[TextBlock(text="ok")]
        )
        for call_id in results_for
    ]
    return ProviderRequest(
        model=model,
        messages=messages,
        tools=[ToolSpec(name=tool_name_for(t)) for t in tools],
        session_id=session_id,
        **extra,
    )
