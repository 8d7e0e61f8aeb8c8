"""The ``anthropic`` worker against a fake Messages server: blocks, thinking signatures,
prompt caching, usage with cache reads and writes, and its failures."""

from __future__ import annotations

from typing import Any

import pytest

from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    UserMessage,
)
from tackroom.contracts.provider import ToolSpec
from tackroom.engine import Engine
from tackroom.kit.providers.sink import REDACTED_THINKING_PREFIX
from tackroom.testing import collect_stream
from tackroom.testing.fake_llm import (
    Answer,
    FakeAnthropicServer,
    FakeToolCall,
    FakeUsage,
    Reply,
)
from tests.providers.helpers import FakeTime, boot, request

EPHEMERAL = {"type": "ephemeral"}


async def test_streams_thinking_with_its_signature_text_tool_use_and_cache_usage(
    engine: Engine, anthropic_server: FakeAnthropicServer
) -> None:
    async def models_get(payload: Any) -> dict[str, Any]:
        return {
            "schema_version": 1, "provider": "anthropic", "model": payload["model"],
            "wire_api": "anthropic-messages", "context_window": 200000,
            "max_output_tokens": 64000, "known": True,
            "capabilities": {"tools": True, "vision": True, "thinking": True, "cache": True,
                             "streaming": True},
            "prices": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
        }  # fmt: skip

    await engine.register_function("models::get", models_get)
    anthropic_server.add(
        Answer(
            thinking="Weather needs a tool.",
            signature="EqQBCkgIARABGAIi",
            text="Let me check.",
            tool_calls=[FakeToolCall("get_weather", {"city": "Paris"}, id="toolu_01")],
            usage=FakeUsage(
                input_tokens=40, output_tokens=20, cache_read_tokens=1000, cache_write_tokens=200
            ),
        )
    )
    async with boot(engine, "anthropic", anthropic_server):
        stream = await collect_stream(engine, "anthropic", request(model="claude-test"))
    assert stream.thinking == "Weather needs a tool."
    signatures = [f["signature"] for f in stream.frames if f.get("signature")]
    assert signatures == ["EqQBCkgIARABGAIi"]
    assert stream.text == "Let me check."
    message = stream.message
    assert message is not None
    assert message.content == [
        ThinkingBlock(text="Weather needs a tool.", signature="EqQBCkgIARABGAIi"),
        TextBlock(text="Let me check."),
        FunctionCallBlock(id="toolu_01", tool_name="get_weather", arguments={"city": "Paris"}),
    ]
    assert message.stop_reason == "function_call"
    usage = message.usage
    assert (usage.input_tokens, usage.output_tokens) == (40, 20)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (1000, 200)
    # (40*3 + 20*15 + 1000*0.3 + 200*3.75) / 1e6
    assert usage.cost_usd == pytest.approx(1470e-6)
    sent = anthropic_server.requests[0]
    assert sent.body["max_tokens"] == 8192  # the default, under the catalog's 64000
    assert sent.api_key == "sk-test-key"


async def test_the_request_with_cache_anchors_results_and_signed_thinking(
    engine: Engine, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.add(Reply.say("ok"))
    history: list[AgentMessage] = [
        UserMessage.text("Read the notes."),
        AssistantMessage(
            content=[
                ThinkingBlock(text="I should read.", signature="sig-1"),
                ThinkingBlock(text="", signature=REDACTED_THINKING_PREFIX + "opaque"),
                ThinkingBlock(text="unsigned, from another provider"),
                TextBlock(text=""),
                FunctionCallBlock(id="call:1", tool_name="fs__read", arguments={"p": "a"}),
                FunctionCallBlock(id="call:2", tool_name="fs__read", arguments={"p": "b"}),
            ],
            stop_reason="function_call",
        ),
        FunctionResultMessage(
            function_call_id="call:1",
            function_id="fs::read",
            content=[TextBlock(text="A"), ImageBlock(mime="image/png", data="QQ==")],
        ),
        FunctionResultMessage(
            function_call_id="call:2", function_id="fs::read", content=[], is_error=True
        ),
        CustomMessage(custom_type="marker"),
        UserMessage.text("Also summarise."),
    ]
    tools = [
        ToolSpec(name="fs__read", description="Read."),
        ToolSpec(name="calc__add", parameters={"type": "object", "properties": {}}),
    ]
    async with boot(engine, "anthropic", anthropic_server):
        stream = await collect_stream(
            engine, "anthropic", request(*history, tools=tools, temperature=0.5)
        )
    assert stream.message is not None, stream.frames
    body = anthropic_server.requests[0].body
    assert body["system"] == [
        {"type": "text", "text": "You are a test.", "cache_control": EPHEMERAL}
    ]
    assert body["tools"] == [
        {"name": "fs__read", "description": "Read.",
         "input_schema": {"type": "object", "properties": {}}},
        {"name": "calc__add", "input_schema": {"type": "object", "properties": {}},
         "cache_control": EPHEMERAL},
    ]  # fmt: skip
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "Read the notes.", "cache_control": EPHEMERAL},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should read.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "tool_use", "id": "call_1", "name": "fs__read", "input": {"p": "a"}},
            {"type": "tool_use", "id": "call_2", "name": "fs__read", "input": {"p": "b"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": [
                {"type": "text", "text": "A"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "QQ=="}},
            ]},
            {"type": "tool_result", "tool_use_id": "call_2", "is_error": True},
            {"type": "text", "text": "Also summarise.", "cache_control": EPHEMERAL},
        ]},
    ]  # fmt: skip
    assert "temperature" not in body  # the Messages API has none now (send_temperature: true)
    assert "thinking" not in body


async def test_thinking_config_and_caching_off(
    engine: Engine, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.add(Reply.say("ok"))
    profile = {
        "thinking": "enabled",
        "thinking_budget": 2048,
        "prompt_caching": False,
        "send_temperature": True,
    }
    async with boot(engine, "anthropic", anthropic_server, profile=profile):
        await collect_stream(engine, "anthropic", request(max_output_tokens=1000, temperature=0.3))
    body = anthropic_server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 3072  # raised above the thinking budget
    assert "temperature" not in body  # not allowed with thinking
    assert "cache_control" not in repr(body)


async def test_redacted_thinking_is_kept_for_the_next_turn(
    engine: Engine, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.add(Answer(redacted_thinking="EmwKAhgBEgy3", text="Done."))
    async with boot(engine, "anthropic", anthropic_server):
        stream = await collect_stream(engine, "anthropic", request())
    message = stream.message
    assert message is not None
    assert message.content == [
        ThinkingBlock(text="", signature=REDACTED_THINKING_PREFIX + "EmwKAhgBEgy3"),
        TextBlock(text="Done."),
    ]
    assert stream.thinking == ""


@pytest.mark.parametrize(
    ("first", "kind"),
    [
        (Reply.status_error(529, "Overloaded"), "transient"),
        (Reply.rate_limited(retry_after=4), "rate_limited"),
        (Reply.stream_error(Answer(text="x"), after=1), "transient"),
    ],
    ids=["overloaded", "rate_limited", "error_event_before_output"],
)
async def test_retryable_failures_are_retried(
    engine: Engine, anthropic_server: FakeAnthropicServer, first: Reply, kind: str
) -> None:
    anthropic_server.add(first, Reply.say("Recovered."))
    time = FakeTime()
    async with boot(engine, "anthropic", anthropic_server, time=time):
        stream = await collect_stream(engine, "anthropic", request())
    assert stream.text == "Recovered."
    assert len(time.sleeps) == 1
    if kind == "rate_limited":
        assert time.sleeps == [4.0]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply.unauthorized("invalid x-api-key"), "auth"),
        (Reply.context_overflow(), "context_overflow"),
        (Reply.status_error(400, "messages.1: tool_use ids must be unique"), "permanent"),
        (Answer(text="I can't help with that.", stop="refusal"), "permanent"),
    ],
)
async def test_failures_that_are_not_retried(
    engine: Engine, anthropic_server: FakeAnthropicServer, reply: Reply | Answer, kind: str
) -> None:
    anthropic_server.add(reply)
    time = FakeTime()
    async with boot(engine, "anthropic", anthropic_server, time=time):
        stream = await collect_stream(engine, "anthropic", request())
    assert stream.error is not None
    assert stream.error["kind"] == kind
    assert time.sleeps == []
    assert len(anthropic_server.requests) == 1


async def test_a_disconnect_after_output_is_an_error_frame(
    engine: Engine, anthropic_server: FakeAnthropicServer
) -> None:
    # message_start, block start, ping, two deltas: then the socket closes
    anthropic_server.add(Reply.disconnect(Answer(text="abcdefghijklmnop", chunk=4), after=5))
    async with boot(engine, "anthropic", anthropic_server):
        stream = await collect_stream(engine, "anthropic", request())
    assert stream.types == ["start", "text_delta", "text_delta", "error"]
    assert stream.error is not None
    assert stream.error["kind"] == "transient"
    assert "mid-stream" in stream.error["message"]


async def test_complete_returns_the_same_message(
    engine: Engine, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.add(Answer(text="Hello!", usage=FakeUsage(input_tokens=3, output_tokens=2)))
    async with boot(engine, "anthropic", anthropic_server):
        raw = await engine.trigger(
            "provider::anthropic::complete", request().model_dump(mode="json")
        )
    message = AssistantMessage.model_validate(raw)
    assert (message.provider, message.model, message.stop_reason) == (
        "anthropic",
        "test-model",
        "end",
    )
    assert message.content == [TextBlock(text="Hello!")]
    assert anthropic_server.requests[0].stream  # complete streams too (one code path)
