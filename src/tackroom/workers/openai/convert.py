"""A :class:`ProviderRequest` as Chat Completions parameters (plain JSON, no SDK types).

- the system prompt is the first message (role ``system`` or ``developer``);
- user text and images become ``content`` (a string when it is text only);
- assistant text becomes ``content``, function calls ``tool_calls`` (``name`` is
  ``FunctionCallBlock.tool_name``, arguments JSON-encoded); thinking is not sent back;
- each function result becomes a ``tool`` message; images of results (which ``tool`` messages
  cannot carry) follow in one user message;
- custom messages and errored assistant messages are skipped, and calls and results are paired
  (see :func:`~tackroom.kit.providers.history.prepare_history`);
- an ``output_format`` becomes ``response_format: {type: json_schema, json_schema: {name,
  schema, strict}}``.
"""

from __future__ import annotations

import json
from typing import Any

from tackroom.contracts.messages import (
    AssistantMessage,
    ContentBlock,
    FunctionCallBlock,
    ImageBlock,
    TextBlock,
    UserMessage,
    text_of,
    unparsed_arguments,
)
from tackroom.contracts.provider import OutputFormat, ProviderRequest, ToolSpec
from tackroom.kit.providers.history import prepare_history, result_text
from tackroom.workers.openai.config import OpenAIProfile

__all__ = ["chat_messages", "chat_params", "chat_tools", "response_format"]


def _image_part(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{block.mime};base64,{block.data}"}}


def _user_content(blocks: list[ContentBlock]) -> str | list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append(_image_part(block))
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)
    return parts


def _tool_call(block: FunctionCallBlock) -> dict[str, Any]:
    raw = unparsed_arguments(block.arguments)
    return {
        "id": block.id,
        "type": "function",
        "function": {
            "name": block.tool_name,
            # the model's own text when it was not a JSON object: the call as it was made
            "arguments": json.dumps(block.arguments, ensure_ascii=False) if raw is None else raw,
        },
    }


def chat_messages(request: ProviderRequest, *, system_role: str = "system") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system_prompt:
        out.append({"role": system_role, "content": request.system_prompt})
    images: list[dict[str, Any]] = []

    def flush_images() -> None:
        if images:
            out.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Images returned by the calls above:"},
                        *images,
                    ],
                }
            )
            images.clear()

    for message in prepare_history(request.messages):
        if isinstance(message, UserMessage):
            flush_images()
            out.append({"role": "user", "content": _user_content(message.content)})
        elif isinstance(message, AssistantMessage):
            flush_images()
            text = text_of(message.content)
            calls = [_tool_call(call) for call in message.function_calls()]
            if not text and not calls:
                continue
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        else:
            text = result_text(message)
            if message.is_error and not text.lower().startswith("error"):
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": message.function_call_id, "content": text})
            images.extend(_image_part(b) for b in message.content if isinstance(b, ImageBlock))
    flush_images()
    return out


def chat_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters}
        if tool.description:
            function["description"] = tool.description
        out.append({"type": "function", "function": function})
    return out


def response_format(output: OutputFormat) -> dict[str, Any]:
    """Structured Outputs: the answer constrained to the schema (``strict`` only when the schema
    meets strict mode's rules, which the caller decided)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": output.name, "schema": output.json_schema, "strict": output.strict},
    }


def chat_params(request: ProviderRequest, model: str, profile: OpenAIProfile) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for one streamed attempt."""
    params: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(request, system_role=profile.system_role),
        "stream": True,
    }
    if profile.stream_usage:
        params["stream_options"] = {"include_usage": True}
    if request.tools:
        params["tools"] = chat_tools(request.tools)
        if profile.parallel_tool_calls is not None:
            params["parallel_tool_calls"] = profile.parallel_tool_calls
    if request.max_output_tokens is not None:
        params[profile.max_tokens_param] = request.max_output_tokens
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.output_format is not None:
        params["response_format"] = response_format(request.output_format)
    if profile.reasoning_effort is not None:
        params["reasoning_effort"] = profile.reasoning_effort
    if profile.prompt_cache_key and request.session_id:
        params["prompt_cache_key"] = request.session_id
    if profile.extra_body:
        params["extra_body"] = dict(profile.extra_body)
    return params
