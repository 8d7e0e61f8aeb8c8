"""The transcript a provider sends, made valid for APIs that pair every call with its result.

Both wire formats reject a tool call without a result right after it and a result without its
call. :func:`prepare_history` takes the shared :data:`AgentMessage` list and returns one that
keeps that rule:

- ``custom`` messages (an application's own entries) are skipped;
- assistant messages that ended in ``error`` are skipped (the model never finished them);
- ``function_result`` blocks inside a user message become result messages;
- the results of an assistant message's calls are moved right after it, in call order, and a
  call without a result gets one saying it was not run (``is_error``);
- a result whose call is not in the assistant message before it becomes a user note.
"""

from __future__ import annotations

from collections.abc import Sequence

from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    FunctionResultBlock,
    FunctionResultMessage,
    TextBlock,
    UserMessage,
)

__all__ = ["NOT_RUN", "prepare_history", "result_text"]

NOT_RUN = "no result: the call was not run"

Wire = UserMessage | AssistantMessage | FunctionResultMessage


def result_text(result: FunctionResultMessage) -> str:
    """The text blocks of a result, joined by newlines."""
    return "\n".join(block.text for block in result.content if isinstance(block, TextBlock))


def _split_user(message: UserMessage) -> list[Wire]:
    results = [b for b in message.content if isinstance(b, FunctionResultBlock)]
    if not results:
        return [message]
    out: list[Wire] = [
        FunctionResultMessage(
            function_call_id=block.function_call_id,
            function_id="",
            content=block.content,
            is_error=block.is_error,
        )
        for block in results
    ]
    rest = [b for b in message.content if not isinstance(b, FunctionResultBlock)]
    if rest:
        out.append(message.model_copy(update={"content": rest}))
    return out


def _orphan(result: FunctionResultMessage) -> UserMessage:
    text = result_text(result) or "(no text)"
    return UserMessage.text(f"[result of call {result.function_call_id}]\n{text}")


def prepare_history(messages: Sequence[AgentMessage]) -> list[Wire]:
    flat: list[Wire] = []
    for message in messages:
        if isinstance(message, CustomMessage):
            continue
        if isinstance(message, AssistantMessage) and message.stop_reason == "error":
            continue
        if isinstance(message, UserMessage):
            flat.extend(_split_user(message))
        else:
            flat.append(message)
    out: list[Wire] = []
    index = 0
    while index < len(flat):
        message = flat[index]
        index += 1
        if isinstance(message, FunctionResultMessage):
            out.append(_orphan(message))
            continue
        out.append(message)
        calls = message.function_calls() if isinstance(message, AssistantMessage) else []
        if not calls:
            continue
        # everything up to the next assistant message answers (or interrupts) these calls
        end = index
        while end < len(flat) and not isinstance(flat[end], AssistantMessage):
            end += 1
        results: dict[str, FunctionResultMessage] = {}
        others: list[Wire] = []
        wanted = {call.id for call in calls}
        for item in flat[index:end]:
            if isinstance(item, FunctionResultMessage) and item.function_call_id in wanted:
                results.setdefault(item.function_call_id, item)
            elif isinstance(item, FunctionResultMessage):
                others.append(_orphan(item))
            else:
                others.append(item)
        for call in calls:
            out.append(
                results.get(call.id)
                or FunctionResultMessage(
                    function_call_id=call.id,
                    function_id=call.tool_name,
                    content=[TextBlock(text=NOT_RUN)],
                    is_error=True,
                )
            )
        out.extend(others)
        index = end
    return out
