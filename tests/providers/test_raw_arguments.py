"""A model's tool-call arguments that are not JSON: the model reads why, the server its own call.

End to end through the facade, the orchestrator and each provider worker, against the fake SSE
servers: the first answer calls ``add`` with broken JSON, the second calls it properly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.messages import (
    RAW_ARGUMENTS_KEY,
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    UserMessage,
    text_of,
)
from tackroom.contracts.provider import ProviderRequest
from tackroom.harness import Harness
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.fake_llm import (
    Answer,
    FakeAnthropicServer,
    FakeLLMServer,
    FakeOpenAIServer,
    FakeToolCall,
    Reply,
)
from tackroom.workers.openai.convert import chat_messages
from tackroom.workers.orchestrator.planning import json_problem

BROKEN = '{"a": 2, "b": '
TOLD = (
    "the arguments of your call to add are not valid JSON: Expecting value at line 1, column 15;"
    " send them again as one JSON object"
)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script(server: FakeLLMServer) -> None:
    server.add(
        Answer(tool_calls=[FakeToolCall("add", BROKEN, id="call_1")]),
        Answer(tool_calls=[FakeToolCall("add", {"a": 2, "b": 3}, id="call_2")]),
        Reply.say("2 + 3 = 5"),
    )


async def run(server: FakeLLMServer, worker: str, model: str, home: Path) -> list[Any]:
    config = HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "worker_config": {worker: {"profiles": {worker: {"base_url": server.base_url}}}},
        }
    )
    async with Harness(f"{worker}:{model}", config=config, tools=[add], home=home) as harness:
        result = await harness.run("What is 2 + 3?")
    assert not server.violations, server.violations
    assert result.output == "2 + 3 = 5"
    results = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert [text_of(m.content) for m in results] == [TOLD, "5"]
    assert results[0].is_error
    assert results[0].details == {
        "error": "invalid_json",
        "reason": "are not valid JSON: Expecting value at line 1, column 15",
    }
    return [request.body for request in server.requests]


async def test_openai_wire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    async with FakeOpenAIServer() as server:
        script(server)
        bodies = await run(server, "openai", "gpt-5-mini", tmp_path)
    second = bodies[1]
    assert RAW_ARGUMENTS_KEY not in json.dumps(second)
    [call] = next(m for m in second["messages"] if m["role"] == "assistant")["tool_calls"]
    assert call["function"] == {"name": "add", "arguments": BROKEN}  # the call as it was made
    [told] = [m for m in second["messages"] if m["role"] == "tool"]
    assert (told["tool_call_id"], told["content"]) == ("call_1", f"Error: {TOLD}")


async def test_anthropic_wire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    async with FakeAnthropicServer() as server:
        script(server)
        bodies = await run(server, "anthropic", "claude-sonnet-4-6", tmp_path)
    second = bodies[1]
    assert RAW_ARGUMENTS_KEY not in json.dumps(second)
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    [use] = [b for b in assistant["content"] if b["type"] == "tool_use"]
    assert (use["name"], use["input"]) == ("add", {})  # this wire's input must be an object
    [result] = [
        b
        for m in second["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert result["is_error"] is True
    assert TOLD in json.dumps(result["content"])


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("{'a': 1}", "are not valid JSON: Expecting property name enclosed in double quotes"),
        ("[1, 2]", "are a JSON array, not one JSON object"),
        ('"add 2 and 3"', "are a JSON string, not one JSON object"),
        ("7", "are a JSON number, not one JSON object"),
        ("null", "are JSON null, not one JSON object"),
        ("[" * 100_000 + "]" * 100_000, "nest too deeply to read"),
    ],
    ids=["quotes", "array", "string", "number", "null", "100000-deep"],
)
def test_the_reason_names_what_was_wrong(raw: str, problem: str) -> None:
    assert json_problem(raw).startswith(problem)


def test_a_transcript_that_holds_such_a_call_replays_it_verbatim() -> None:
    """A stored session (written before or after this change) converts the same way."""
    call = FunctionCallBlock(id="c", tool_name="add", arguments={RAW_ARGUMENTS_KEY: BROKEN})
    request = ProviderRequest(
        model="m",
        system_prompt="",
        messages=[
            UserMessage.text("hi"),
            AssistantMessage(content=[call], stop_reason="function_call"),
        ],
    )
    [assistant] = [m for m in chat_messages(request) if m["role"] == "assistant"]
    assert assistant["tool_calls"][0]["function"]["arguments"] == BROKEN
