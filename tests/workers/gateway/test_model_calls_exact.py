"""``GET /v1/sessions/{sid}/model-calls`` lists what each model call was sent, exactly: the system
prompt, the tools and the messages as the provider got them (after hooks, compaction, tools
written in text), recorded by the orchestrator at call time. A run goes through the Harness (a
model that keeps each request it got); a gateway then reads the same engine, on both backends."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness, ToolCall
from tackroom.contracts.messages import AgentMessage, UserMessage, text_of
from tackroom.contracts.modelprompts import PROMPTS_SCOPE
from tackroom.contracts.provider import ProviderRequest
from tackroom.contracts.sessions import (
    APPEND_BATCH,
    ENSURE,
    AppendBatchRequest,
    BatchItem,
    EnsureRequest,
)
from tackroom.hooks import replace
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import FunctionModel, ModelInfo
from tackroom.testing.contracts.compactor import conversation
from tackroom.testing.fake_llm import FakeOpenAIServer, Reply

from .served import gateway_config, serving

SYSTEM = "You are Quill, a careful assistant. Answer in one line."
SUMMARY_START = "You compact a conversation"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adds_then_answers(messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
    if info.system_prompt.startswith(SUMMARY_START):
        return "A summary of the earlier questions."
    if not any(m.role == "function_result" for m in messages):
        return ToolCall("add", {"a": 2, "b": 3})
    return "2 + 3 = 5"


@dataclass
class Listed:
    calls: list[dict[str, Any]]
    parts: int
    """The parts of the session's prompts stored (each once)."""


async def model_calls(
    home: Path, engine_url: str, session_id: str, *, forget_parts: bool = False
) -> Listed:
    """The session's model calls as a gateway on the same engine lists them (``forget_parts``:
    as if recorded before the parts of prompts were kept)."""
    async with (
        serving(gateway_config(home, engine_url, script=[])) as served,
        served.client() as client,
    ):
        parts = await served.engine.list_state(PROMPTS_SCOPE.name, prefix=f"{session_id}/")
        if forget_parts:
            for entry in parts:
                await served.engine.delete_state(PROMPTS_SCOPE.name, entry.key)
        answer = await client.get(f"/v1/sessions/{session_id}/model-calls")
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
    assert body["schema_version"] == 2
    return Listed(body["calls"], len(parts))


def as_sent(request: ProviderRequest) -> dict[str, Any]:
    return {
        "system_prompt": request.system_prompt,
        "tools": [tool.model_dump(mode="json") for tool in request.tools],
        "messages": [message.model_dump(mode="json") for message in request.messages],
    }


def as_listed(call: dict[str, Any]) -> dict[str, Any]:
    return {
        "system_prompt": call["system_prompt"],
        "tools": call["tools"],
        "messages": [item["message"] for item in call["prompt"]],
    }


async def test_the_system_prompt_tools_and_messages_are_as_sent(
    engine_url: str, tmp_path: Path
) -> None:
    model = FunctionModel(adds_then_answers)
    async with Harness(
        model, engine=engine_url, home=tmp_path, tools=[add], instructions=SYSTEM
    ) as harness:
        result = await harness.run("What is 2 + 3?", session="exact")
    assert result.ok, result.error
    listed = await model_calls(tmp_path, engine_url, "exact")
    calls = listed.calls
    assert len(calls) == len(model.requests) == 2
    for call, request in zip(calls, model.requests, strict=True):
        assert call["exact"] is True
        assert call["tool_calling"] == "native"
        assert as_listed(call) == as_sent(request)
    first, second = calls
    assert SYSTEM in first["system_prompt"]
    [tool] = first["tools"]
    assert (tool["name"], tool["description"]) == ("add", "Add two integers.")
    assert set(tool["parameters"]["properties"]) == {"a", "b"}
    # every message was a session entry, named by its id
    assert [item["entry_id"] is not None for item in second["prompt"]] == [True, True, True]
    assert second["usage"]["input_tokens"] >= 0
    assert listed.parts == 2  # each part once: the system prompt and the tool set


async def test_a_message_a_hook_rewrote_is_listed_as_sent(engine_url: str, tmp_path: Path) -> None:
    async def rewrite(call: dict[str, Any]) -> Any:
        messages = [
            json.loads(json.dumps(m).replace("hunter2", "[removed]")) for m in call["messages"]
        ]
        return replace({**call, "messages": messages})

    model = FunctionModel(adds_then_answers)
    harness = Harness(model, engine=engine_url, home=tmp_path, tools=[add])
    harness.add_hook("before_model_call", rewrite)
    async with harness:
        result = await harness.run("My password is hunter2. What is 2 + 3?", session="hooked")
    assert result.ok, result.error
    calls = (await model_calls(tmp_path, engine_url, "hooked")).calls
    assert [as_listed(call) for call in calls] == [as_sent(r) for r in model.requests]
    for call in calls:
        question = call["prompt"][0]
        assert question["entry_id"] is None  # not the session's entry: the hook changed it
        assert "[removed]" in text_of(UserMessage.model_validate(question["message"]).content)
        assert "hunter2" not in json.dumps(call["prompt"])
    # the rest are the session's entries, as stored
    assert [item["entry_id"] is not None for item in calls[1]["prompt"]] == [False, True, True]


async def test_a_compacted_history_lists_the_summary_as_sent(
    engine_url: str, tmp_path: Path
) -> None:
    model = FunctionModel(adds_then_answers)
    context = {"context_window_limit": 3_000, "keep_last": 2}
    async with Harness(
        model, engine=engine_url, home=tmp_path, tools=[add], context=context
    ) as harness:
        await ENSURE.call(harness.bus, EnsureRequest(session_id="long"))
        items = [BatchItem(entry_id=f"long-{i}", message=m) for i, m in conversation(20)]
        await APPEND_BATCH.call(harness.bus, AppendBatchRequest(session_id="long", entries=items))
        for prompt in ("What is 2 + 3?", "And again?"):
            result = await harness.run(prompt, session="long")
            assert result.ok, result.error
    turns = [r for r in model.requests if not r.system_prompt.startswith(SUMMARY_START)]
    assert len(turns) < len(model.requests)  # the history was compacted
    listed = await model_calls(tmp_path, engine_url, "long")
    calls = [call for call in listed.calls if call["run_id"] is not None]  # not the filled ones
    assert len(calls) == len(turns) == 3
    assert [as_listed(call) for call in calls] == [as_sent(r) for r in turns]
    summaries = [
        item
        for call in calls
        for item in call["prompt"]
        if "[Summary of the earlier conversation" in json.dumps(item["message"])
    ]
    assert summaries, "no call was sent a compaction summary"
    assert all(item["entry_id"] is None for item in summaries)
    assert "A summary of the earlier questions." in json.dumps(summaries[-1]["message"])
    assert len(calls[-1]["prompt"]) < len(items)  # the compacted history, not the whole path


async def test_tools_written_in_text_are_listed_as_sent(
    engine_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_KEY", "sk-test-model-calls")
    async with FakeOpenAIServer() as server:
        block = "```tool_call\n" + json.dumps({"name": "add", "arguments": {"a": 2, "b": 3}})
        server.add(Reply.say("Let me add.\n" + block + "\n```"))
        server.add(Reply.say("2 + 3 = 5"))
        profile = {
            "base_url": server.base_url,
            "api_key_env": "TEST_KEY",
            "catalog": False,
            "tool_calling": "text",
        }
        config = HarnessConfig.model_validate(
            {
                "schema_version": 1,
                "worker_config": {"openai": {"profiles": {"openai": None, "local": profile}}},
            }
        )
        async with Harness(
            "local:tiny", config=config, engine=engine_url, home=tmp_path, tools=[add]
        ) as harness:
            result = await harness.run("What is 2 + 3?", session="texty")
        first, second = server.requests
    assert result.ok, result.error
    calls = (await model_calls(tmp_path, engine_url, "texty")).calls
    sent = [first.body["messages"], second.body["messages"]]
    for call, messages in zip(calls, sent, strict=True):
        assert call["exact"] is True
        assert call["tool_calling"] == "text"
        assert [t["name"] for t in call["tools"]] == ["add"]  # offered in the system prompt
        assert call["system_prompt"] == messages[0]["content"]
        assert "- add: Add two integers." in call["system_prompt"]
        assert len(call["prompt"]) == len(messages) - 1
    last = calls[1]["prompt"][-1]
    assert last["entry_id"] is None
    assert last["message"]["role"] == "user"
    assert "Tool result of call" in json.dumps(last["message"])
    assert json.dumps(second.body["messages"][-1]["content"]).count("Tool result of call") == 1


async def test_a_call_recorded_before_is_rebuilt_not_exact(engine_url: str, tmp_path: Path) -> None:
    model = FunctionModel(adds_then_answers)
    async with Harness(model, engine=engine_url, home=tmp_path, tools=[add]) as harness:
        result = await harness.run("What is 2 + 3?", session="older")
        assert result.ok, result.error
    calls = (await model_calls(tmp_path, engine_url, "older", forget_parts=True)).calls
    assert [call["exact"] for call in calls] == [False, False]
    assert [call["system_prompt"] for call in calls] == [None, None]
    assert [len(call["prompt"]) for call in calls] == [1, 3]  # rebuilt from the session
