"""Tools written in text: the prompt, the parser, the correction and the history (pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tackroom.contracts.messages import (
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    TextBlock,
    UserMessage,
    text_of,
)
from tackroom.contracts.provider import ToolSpec
from tackroom.kit.texttools import (
    CallProblem,
    as_text_history,
    correction,
    format_call,
    parse_calls,
    tools_prompt,
)

NAMES = ["fs__read", "add"]


def said(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextBlock(text=text)])


def test_an_answer_without_blocks_is_unchanged() -> None:
    message = said("Just an answer, with `code` and ```python\nprint(1)\n```")
    assert parse_calls(message, NAMES) is message


def test_blocks_become_calls_and_the_text_around_them_stays() -> None:
    text = "Reading both.\n" + format_call("fs__read", {"path": "a"}) + "\nand\n"
    text += format_call("add", {"a": 1, "b": 2})
    parsed = parse_calls(said(text), NAMES)
    assert isinstance(parsed, AssistantMessage)
    assert parsed.stop_reason == "function_call"
    assert [b.text for b in parsed.content if isinstance(b, TextBlock)] == ["Reading both.", "and"]
    assert [(c.id, c.tool_name, c.arguments) for c in parsed.function_calls()] == [
        ("call_1", "fs__read", {"path": "a"}),
        ("call_2", "add", {"a": 1, "b": 2}),
    ]


def test_arguments_given_as_a_json_string_are_read() -> None:
    body = json.dumps({"name": "add", "arguments": json.dumps({"a": 1})})
    parsed = parse_calls(said(f"```tool_call\n{body}\n```"), NAMES)
    assert isinstance(parsed, AssistantMessage)
    assert parsed.function_calls()[0].arguments == {"a": 1}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('```tool_call\n{"name": "add", "arguments": {"a": 1,\n```', "not valid JSON"),
        ("```tool_call\n[1, 2]\n```", "one JSON object"),
        ('```tool_call\n{"arguments": {}}\n```', '"name"'),
        ('```tool_call\n{"name": "rm", "arguments": {}}\n```', "no tool named 'rm'"),
        ('```tool_call\n{"name": "add", "arguments": [1]}\n```', "must be a JSON object"),
        ('```tool_call\n{"name": "add", "args": {}}\n```', "unknown keys ['args']"),
        ('```tool_call\n{"name": "add", "arguments": "{oops"}\n```', "string that is not JSON"),
        ('```tool_call\n{"name": "add", "arguments": {}}', "never closed"),
    ],
)
def test_an_unreadable_block_is_a_problem_saying_why(text: str, reason: str) -> None:
    problem = parse_calls(said(text), NAMES)
    assert isinstance(problem, CallProblem)
    assert reason in problem.reason
    assert reason in text_of(correction(problem).content)


def test_the_prompt_lists_every_tool_and_the_format() -> None:
    prompt = tools_prompt(
        [
            ToolSpec(name="add", description="Add two integers.", parameters={"type": "object"}),
            ToolSpec(name="fs__read"),
        ]
    )
    assert "```tool_call\n" in prompt
    assert "- add: Add two integers." in prompt
    assert '  parameters: {"type": "object"}' in prompt
    assert "- fs__read: (no description)" in prompt


def test_history_writes_calls_as_blocks_and_results_as_one_user_message() -> None:
    call = AssistantMessage(
        content=[
            TextBlock(text="Adding."),
            FunctionCallBlock(id="c1", tool_name="add", arguments={"a": 1}),
            FunctionCallBlock(id="c2", tool_name="add", arguments={"a": 2}),
        ],
        stop_reason="function_call",
    )
    results = [
        FunctionResultMessage(
            function_call_id=cid, function_id="add", content=[TextBlock(text=out)], is_error=err
        )
        for cid, out, err in (("c1", "1", False), ("c2", "boom", True))
    ]
    history = as_text_history([UserMessage.text("go"), call, *results])
    assert len(history) == 3
    assistant, user = history[1], history[2]
    assert isinstance(assistant, AssistantMessage)
    assert text_of(assistant.content).count("```tool_call") == 2
    assert not assistant.function_calls()
    assert isinstance(user, UserMessage)
    texts = [b.text for b in user.content if isinstance(b, TextBlock)]
    assert texts == ["Tool result of call c1:", "1", "Tool result of call c2 (error):", "boom"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    arguments=st.dictionaries(st.text(max_size=10), _JSON, max_size=4),
    before=st.text(max_size=40).filter(lambda t: "```" not in t),
    after=st.text(max_size=40).filter(lambda t: "```" not in t),
)
def test_a_formatted_call_parses_back(
    name: str, arguments: dict[str, Any], before: str, after: str
) -> None:
    parsed = parse_calls(said(f"{before}\n{format_call(name, arguments)}\n{after}"), NAMES)
    assert isinstance(parsed, AssistantMessage)
    (call,) = parsed.function_calls()
    assert (call.tool_name, call.arguments) == (name, arguments)
    kept = [b.text for b in parsed.content if isinstance(b, TextBlock)]
    assert kept == [t.strip() for t in (before, after) if t.strip()]


def test_a_fence_inside_an_argument_does_not_end_the_block() -> None:
    arguments = {"```": "a ``` b `c`"}
    parsed = parse_calls(said(format_call("fs__read", arguments)), NAMES)
    assert isinstance(parsed, AssistantMessage)
    (call,) = parsed.function_calls()
    assert (call.tool_name, call.arguments) == ("fs__read", arguments)


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_parses_or_says_why(text: str) -> None:
    outcome = parse_calls(said(text), NAMES)
    assert isinstance(outcome, AssistantMessage | CallProblem)
