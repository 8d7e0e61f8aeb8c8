"""Tool calling written in text, for models without native tool calling (pure, no I/O).

A profile with ``tool_calling: text`` gets its tools described in the system prompt
(:func:`tools_prompt`) and no native tools. The model calls a tool by writing a fenced block
tagged ``tool_call`` that holds one JSON object::

    ```tool_call
    {"name": "fs__read", "arguments": {"path": "notes.txt"}}
    ```

:func:`parse_calls` turns the blocks of an answer into real ``function_call`` blocks (the text
around them stays text); a block that cannot be read is a :class:`CallProblem`, which the turn
answers with :func:`correction`. :func:`as_text_history` writes earlier calls and their results
back as text, since a server without tool calling cannot take them as tool messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    ContentBlock,
    FunctionCallBlock,
    FunctionResultMessage,
    ImageBlock,
    TextBlock,
    UserMessage,
)
from tackroom.contracts.provider import ToolSpec

__all__ = [
    "FENCE_TAG",
    "CallProblem",
    "as_text_history",
    "correction",
    "format_call",
    "parse_calls",
    "tools_prompt",
]

FENCE_TAG = "tool_call"
_BLOCK = re.compile(r"```tool_call[ \t]*\r?\n(.*?)```", re.DOTALL)
_OPENING = re.compile(r"```tool_call\b")
_RESULT_HEADER = "Tool result"


@dataclass(frozen=True, slots=True)
class CallProblem:
    """Why a ``tool_call`` block of the answer could not be read, in words for the model."""

    reason: str


def format_call(name: str, arguments: dict[str, Any]) -> str:
    """One call as the block the model is asked to write. A backtick in a string is written
    ``\\u0060``, so a value holding a fence does not end the block early."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    body = body.replace("`", "\\u0060")
    return f"```{FENCE_TAG}\n{body}\n```"


def tools_prompt(tools: Sequence[ToolSpec]) -> str:
    """The system prompt section that offers ``tools`` and says how to call them."""
    example = format_call("TOOL_NAME", {"ARGUMENT": "VALUE"})
    lines = [
        "## Tools",
        "",
        "You can call the tools below. To call one, write a fenced block tagged tool_call that"
        ' holds one JSON object with "name" (a tool name from the list) and "arguments" (an'
        " object matching the tool's parameters):",
        "",
        example,
        "",
        "Write one block per call (several blocks call several tools), then stop and wait:"
        f' the results come back in a message starting with "{_RESULT_HEADER}". When you need'
        " no tool, answer in plain text without any tool_call block.",
        "",
        "Available tools:",
    ]
    for tool in tools:
        lines.append(f"- {tool.name}: {tool.description.strip() or '(no description)'}")
        lines.append(f"  parameters: {json.dumps(tool.parameters, sort_keys=True)}")
    return "\n".join(lines)


def parse_calls(
    message: AssistantMessage, tool_names: Sequence[str]
) -> AssistantMessage | CallProblem:
    """``message`` with its ``tool_call`` blocks turned into function calls.

    An answer with no block comes back as it is. Call ids are ``call_1``, ``call_2``… in order
    (the turn renames an id the run already used).
    """
    content: list[ContentBlock] = []
    calls: list[FunctionCallBlock] = []
    for block in message.content:
        if not isinstance(block, TextBlock) or FENCE_TAG not in block.text:
            content.append(block)
            continue
        found = _split(block.text, tool_names, first_id=len(calls) + 1)
        if isinstance(found, CallProblem):
            return found
        texts, new_calls = found
        content.extend(TextBlock(text=text) for text in texts)
        calls.extend(new_calls)
    if not calls:
        return message
    return message.model_copy(
        update={"content": [*content, *calls], "stop_reason": "function_call"}
    )


def _split(
    text: str, tool_names: Sequence[str], *, first_id: int
) -> tuple[list[str], list[FunctionCallBlock]] | CallProblem:
    texts: list[str] = []
    calls: list[FunctionCallBlock] = []
    position = 0
    for match in _BLOCK.finditer(text):
        texts.append(text[position : match.start()])
        position = match.end()
        call = _call(match.group(1), tool_names, call_id=f"call_{first_id + len(calls)}")
        if isinstance(call, CallProblem):
            return call
        calls.append(call)
    rest = text[position:]
    if _OPENING.search(rest):
        return CallProblem("a tool_call block was opened but never closed with ```")
    texts.append(rest)
    return [t.strip() for t in texts if t.strip()], calls


def _call(body: str, tool_names: Sequence[str], *, call_id: str) -> FunctionCallBlock | CallProblem:
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return CallProblem(f"the tool_call block is not valid JSON ({exc.msg} at {exc.pos})")
    if not isinstance(value, dict):
        return CallProblem("the tool_call block must hold one JSON object")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return CallProblem('the tool_call object needs "name", a tool name')
    if name not in tool_names:
        offered = ", ".join(tool_names) or "none"
        return CallProblem(f"there is no tool named {name!r} (the tools are: {offered})")
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return CallProblem(f'the "arguments" of {name!r} are a string that is not JSON')
    if not isinstance(arguments, dict):
        return CallProblem(f'the "arguments" of {name!r} must be a JSON object')
    extra = sorted(set(value) - {"name", "arguments"})
    if extra:
        return CallProblem(f'the tool_call object has unknown keys {extra}; use "arguments"')
    return FunctionCallBlock(id=call_id, tool_name=name, arguments=arguments)


def correction(problem: CallProblem) -> UserMessage:
    """The user message that asks the model to write its call again."""
    return UserMessage.text(
        f"Your tool call could not be read: {problem.reason}. Write it again as a fenced"
        f" block tagged {FENCE_TAG} holding one JSON object,"
        f' {{"name": <a tool name from the list>, "arguments": {{...}}}}, or answer without'
        " a tool."
    )


def as_text_history(messages: Sequence[AgentMessage]) -> list[AgentMessage]:
    """The transcript with calls written as blocks and results as user messages (consecutive
    results in one message)."""
    out: list[AgentMessage] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.function_calls():
            out.append(message.model_copy(update={"content": _calls_as_text(message)}))
        elif isinstance(message, FunctionResultMessage):
            blocks = _result_blocks(message)
            last = out[-1] if out else None
            if isinstance(last, UserMessage) and _is_results(last):
                out[-1] = last.model_copy(update={"content": [*last.content, *blocks]})
            else:
                out.append(UserMessage(content=blocks))
        else:
            out.append(message)
    return out


def _calls_as_text(message: AssistantMessage) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    for block in message.content:
        if isinstance(block, FunctionCallBlock):
            blocks.append(TextBlock(text=format_call(block.tool_name, block.arguments)))
        elif isinstance(block, TextBlock):
            blocks.append(block)
    return blocks


def _result_blocks(message: FunctionResultMessage) -> list[ContentBlock]:
    status = " (error)" if message.is_error else ""
    header = f"{_RESULT_HEADER} of call {message.function_call_id}{status}:"
    blocks: list[ContentBlock] = [TextBlock(text=header)]
    for block in message.content:
        blocks.append(block if isinstance(block, ImageBlock) else TextBlock(text=block.text))
    return blocks


def _is_results(message: UserMessage) -> bool:
    first = message.content[0] if message.content else None
    return isinstance(first, TextBlock) and first.text.startswith(f"{_RESULT_HEADER} of call ")
