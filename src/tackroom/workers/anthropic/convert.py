"""A :class:`ProviderRequest` as Messages API parameters (plain JSON, no SDK types).

- the system prompt is one text block of ``system``;
- user text and images become ``text`` / ``image`` (base64) blocks;
- assistant thinking goes back verbatim: a signed ``ThinkingBlock`` as ``thinking`` with its
  ``signature``, a redacted one as ``redacted_thinking``; unsigned thinking (from another
  provider) is dropped, as the API would reject it; text as ``text``; calls as ``tool_use``
  (``name`` is ``FunctionCallBlock.tool_name``);
- function results become ``tool_result`` blocks of a user message (consecutive results, and a
  user message right after them, share one user message, results first);
- custom messages and errored assistant messages are skipped; calls and results are paired
  (:func:`~tackroom.kit.providers.history.prepare_history`); call ids are made safe for
  the API's pattern the same way in ``tool_use`` and ``tool_result``.

Prompt caching (``cache_control: {"type": "ephemeral"}``, at most four breakpoints): the last
tool, the system prompt, and a rolling anchor on the last cacheable block of the last message
and of the user message before it — so each request reads the prefix the previous one wrote.
"""

from __future__ import annotations

import re
from typing import Any

from tackroom.contracts.messages import (
    AssistantMessage,
    ContentBlock,
    FunctionCallBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    UserMessage,
    unparsed_arguments,
)
from tackroom.contracts.provider import ProviderRequest, ToolSpec
from tackroom.kit.providers.catalog import ModelInfo
from tackroom.kit.providers.history import prepare_history
from tackroom.kit.providers.sink import REDACTED_THINKING_PREFIX
from tackroom.workers.anthropic.config import AnthropicProfile

__all__ = [
    "EPHEMERAL",
    "add_cache_anchors",
    "max_tokens",
    "message_params",
    "safe_id",
    "wire_messages",
    "wire_tools",
]

EPHEMERAL = {"type": "ephemeral"}
_UNSAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})


def safe_id(call_id: str) -> str:
    """A call id matching the API's ``^[a-zA-Z0-9_-]+$``."""
    return _UNSAFE_ID.sub("_", call_id) or "call"


def _image(block: ImageBlock) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": block.mime, "data": block.data},
    }


def _user_blocks(content: list[ContentBlock]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextBlock) and block.text:
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            out.append(_image(block))
    return out


def _assistant_blocks(content: list[ContentBlock]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, ThinkingBlock):
            signature = block.signature
            if signature is None:
                continue
            if signature.startswith(REDACTED_THINKING_PREFIX):
                data = signature[len(REDACTED_THINKING_PREFIX) :]
                out.append({"type": "redacted_thinking", "data": data})
            else:
                out.append({"type": "thinking", "thinking": block.text, "signature": signature})
        elif isinstance(block, TextBlock) and block.text:
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, FunctionCallBlock):
            # ``input`` must be an object on this wire: a call whose text did not parse goes
            # back empty (the tool result says why), never as the rewritten {RAW_ARGUMENTS_KEY: …}
            unparsed = unparsed_arguments(block.arguments) is not None
            out.append(
                {
                    "type": "tool_use",
                    "id": safe_id(block.id),
                    "name": block.tool_name,
                    "input": {} if unparsed else block.arguments,
                }
            )
    return out


def wire_messages(request: ProviderRequest) -> list[dict[str, Any]]:
    """The ``messages`` parameter: alternating roles, results first in their user message."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in prepare_history(request.messages):
        if isinstance(message, UserMessage):
            add("user", _user_blocks(message.content))
        elif isinstance(message, AssistantMessage):
            add("assistant", _assistant_blocks(message.content))
        else:
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": safe_id(message.function_call_id),
            }
            blocks = _user_blocks(list(message.content))
            if blocks:
                result["content"] = blocks
            if message.is_error:
                result["is_error"] = True
            add("user", [result])
    return out


def _anchor(message: dict[str, Any]) -> bool:
    """Mark the last cacheable block of ``message``; ``False`` if it has none."""
    for block in reversed(message["content"]):
        if block.get("type") not in _UNCACHEABLE:
            block["cache_control"] = EPHEMERAL
            return True
    return False


def add_cache_anchors(messages: list[dict[str, Any]], *, count: int = 2) -> None:
    """Rolling anchors: the last message and the user messages before it, ``count`` in all."""
    placed = 0
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        is_last = position == len(messages) - 1
        if (is_last or message["role"] == "user") and _anchor(message):
            placed += 1
            if placed == count:
                return


def wire_tools(tools: list[ToolSpec], *, cache: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        entry: dict[str, Any] = {"name": tool.name, "input_schema": tool.parameters}
        if tool.description:
            entry["description"] = tool.description
        out.append(entry)
    if cache and out:
        out[-1]["cache_control"] = EPHEMERAL
    return out


def max_tokens(request: ProviderRequest, profile: AnthropicProfile, info: ModelInfo) -> int:
    limit = request.max_output_tokens or profile.default_max_output_tokens
    if info.output_limit is not None:
        limit = min(limit, info.output_limit)
    if profile.thinking == "enabled" and limit <= profile.thinking_budget:
        limit = profile.thinking_budget + max(1024, limit)
    return limit


def message_params(
    request: ProviderRequest, model: str, profile: AnthropicProfile, info: ModelInfo
) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for one streamed attempt."""
    cache = profile.prompt_caching and info.supports("cache")
    messages = wire_messages(request)
    if cache:
        add_cache_anchors(messages)
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens(request, profile, info),
        "messages": messages,
        "stream": True,
    }
    if request.system_prompt:
        system: dict[str, Any] = {"type": "text", "text": request.system_prompt}
        if cache:
            system["cache_control"] = EPHEMERAL
        params["system"] = [system]
    if request.tools:
        params["tools"] = wire_tools(request.tools, cache=cache)
    thinking = profile.thinking != "off" and info.supports("thinking")
    if profile.thinking == "enabled" and thinking:
        params["thinking"] = {"type": "enabled", "budget_tokens": profile.thinking_budget}
    elif profile.thinking == "adaptive" and thinking:
        params["thinking"] = {"type": "adaptive"}
    extra = dict(profile.extra_body)
    if profile.send_temperature and request.temperature is not None and not thinking:
        extra["temperature"] = request.temperature  # not a parameter of the SDK any more
    if extra:
        params["extra_body"] = extra
    return params
