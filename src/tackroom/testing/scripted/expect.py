"""Check a request against a turn's ``expect`` block."""

from __future__ import annotations

from tackroom.contracts.messages import (
    FunctionResultBlock,
    FunctionResultMessage,
    UserMessage,
    text_of,
)
from tackroom.contracts.provider import ProviderRequest, tool_name_for
from tackroom.testing.scripted.script import ScriptExpect

__all__ = ["mismatches"]


def _function_result_ids(request: ProviderRequest) -> set[str]:
    ids: set[str] = set()
    for message in request.messages:
        if isinstance(message, FunctionResultMessage):
            ids.add(message.function_call_id)
        for block in message.content:
            if isinstance(block, FunctionResultBlock):
                ids.add(block.function_call_id)
    return ids


def mismatches(expect: ScriptExpect, request: ProviderRequest) -> list[str]:
    """What ``request`` fails of ``expect``, one sentence each (empty: it matches)."""
    problems: list[str] = []
    if expect.model is not None and request.model != expect.model:
        problems.append(f"model is {request.model!r}, expected {expect.model!r}")
    if expect.last_user_contains is not None:
        users = [m for m in request.messages if isinstance(m, UserMessage)]
        last = text_of(users[-1].content) if users else None
        if last is None:
            problems.append(
                f"no user message; expected one containing {expect.last_user_contains!r}"
            )
        elif expect.last_user_contains not in last:
            problems.append(
                f"last user message {last[:200]!r} does not contain {expect.last_user_contains!r}"
            )
    if (
        expect.system_prompt_contains is not None
        and expect.system_prompt_contains not in request.system_prompt
    ):
        problems.append(f"system prompt does not contain {expect.system_prompt_contains!r}")
    offered = {tool.name for tool in request.tools}
    missing = [name for name in expect.tools_include if tool_name_for(name) not in offered]
    if missing:
        problems.append(f"tools {missing} not offered (offered: {sorted(offered)})")
    unwanted = [name for name in expect.tools_exclude if tool_name_for(name) in offered]
    if unwanted:
        problems.append(f"tools {unwanted} offered but expected absent")
    if expect.has_function_result_for:
        present = _function_result_ids(request)
        absent = [call_id for call_id in expect.has_function_result_for if call_id not in present]
        if absent:
            problems.append(f"no function result for {absent} (results for {sorted(present)})")
    if expect.last_role is not None:
        role = request.messages[-1].role if request.messages else None
        if role != expect.last_role:
            problems.append(f"last message role is {role!r}, expected {expect.last_role!r}")
    return problems
