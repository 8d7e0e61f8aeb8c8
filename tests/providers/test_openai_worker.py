"""The ``openai`` worker against a fake Chat Completions server: what it sends, how it streams,
and how it fails, retries and falls back (on a clock that never waits)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
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
from tackroom.testing import collect_stream
from tackroom.testing.fake_llm import (
    Answer,
    FakeOpenAIServer,
    FakeToolCall,
    FakeUsage,
    LoggedRequest,
    Reply,
)
from tests.providers.helpers import FakeTime, boot, request

ANSWER = Answer(
    text="Let me check the weather.",
    thinking="The user wants weather.",
    tool_calls=[FakeToolCall("get_weather", {"city": "Paris", "unit": "c"})],
    usage=FakeUsage(input_tokens=30, output_tokens=17, cache_read_tokens=12),
)


async def test_streams_text_reasoning_tool_calls_and_usage(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(ANSWER)
    async with boot(engine, "openai", openai_server):
        stream = await collect_stream(engine, "openai", request())
    assert stream.types[0] == "start"
    assert stream.types[-3:] == ["usage", "stop", "done"]
    assert stream.thinking == "The user wants weather."
    assert stream.text == "Let me check the weather."
    assert stream.tool_calls() == [
        {"index": 0, "id": "call_fake1", "name": "get_weather",
         "arguments": {"city": "Paris", "unit": "c"}},
    ]  # fmt: skip
    message = stream.message
    assert message is not None
    assert message.stop_reason == "function_call"
    assert message.usage.model_dump() == {
        "input_tokens": 30,
        "output_tokens": 17,
        "cache_read_tokens": 12,
        "cache_write_tokens": 0,
        "cost_usd": 0.0,
    }
    assert isinstance(message.content[0], ThinkingBlock)
    assert message.function_calls()[0].tool_name == "get_weather"


async def test_cost_comes_from_the_catalog(engine: Engine, openai_server: FakeOpenAIServer) -> None:
    async def models_get(payload: Any) -> dict[str, Any]:
        assert payload == {"provider": "openai", "model": "gpt-5-mini"}
        return {
            "schema_version": 1, "provider": "openai", "model": "gpt-5-mini",
            "wire_api": "openai-chat", "context_window": 400000, "max_output_tokens": 128000,
            "capabilities": {"tools": True, "vision": True, "thinking": True, "cache": True,
                             "streaming": True},
            "known": True,
            "prices": {"input": 0.25, "output": 2.0, "cache_read": 0.025, "cache_write": 0.0},
        }  # fmt: skip

    await engine.register_function("models::get", models_get)
    openai_server.add(ANSWER)
    async with boot(engine, "openai", openai_server):
        stream = await collect_stream(engine, "openai", request(model="gpt-5-mini"))
    message = stream.message
    assert message is not None
    # (30 * 0.25 + 17 * 2.0 + 12 * 0.025) / 1e6
    assert message.usage.cost_usd == pytest.approx(41.8e-6)
    assert stream.frames[-3]["usage"]["cost_usd"] == pytest.approx(41.8e-6)


async def test_the_request_in_chat_completions_shape(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Reply.say("ok"))
    history: list[AgentMessage] = [
        UserMessage(
            content=[TextBlock(text="What is this?"), ImageBlock(mime="image/png", data="AAAA")]
        ),
        AssistantMessage(
            content=[
                ThinkingBlock(text="private", signature="s"),
                TextBlock(text="Reading."),
                FunctionCallBlock(id="c1", tool_name="fs__read", arguments={"path": "ü.md"}),
            ],
            stop_reason="function_call",
        ),
        FunctionResultMessage(
            function_call_id="c1",
            function_id="fs::read",
            content=[TextBlock(text="no such file"), ImageBlock(mime="image/png", data="BBBB")],
            is_error=True,
        ),
        CustomMessage(custom_type="note", content=[TextBlock(text="not for the model")]),
        UserMessage.text("Try again."),
    ]
    tools = [ToolSpec(name="fs__read", description="Read a file.", parameters={"type": "object"})]
    async with boot(engine, "openai", openai_server):
        stream = await collect_stream(
            engine,
            "openai",
            request(*history, tools=tools, max_output_tokens=99, temperature=0.2, session_id="s1"),
        )
    assert stream.message is not None
    body = openai_server.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "You are a test."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ]},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "fs__read", "arguments": '{"path": "ü.md"}'}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: no such file"},
        {"role": "user", "content": [
            {"type": "text", "text": "Images returned by the calls above:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,BBBB"}},
        ]},
        {"role": "user", "content": "Try again."},
    ]  # fmt: skip
    assert body["tools"] == [
        {"type": "function", "function": {"name": "fs__read", "description": "Read a file.",
                                          "parameters": {"type": "object"}}},
    ]  # fmt: skip
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 99  # the openai profile's name for the limit
    assert body["temperature"] == 0.2
    assert body["prompt_cache_key"] == "s1"
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-test-key"


async def test_a_compatible_server_gets_max_tokens_and_extra_body(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Reply.say("ok"))
    profile = {"extra_body": {"top_k": 20}, "headers": {"X-Title": "tests"}}
    async with boot(engine, "openai", openai_server, name="vllm", profile=profile):
        await collect_stream(engine, "vllm", request(max_output_tokens=50, session_id="s1"))
    sent = openai_server.requests[0]
    assert (sent.body["max_tokens"], sent.body["top_k"]) == (50, 20)
    assert "prompt_cache_key" not in sent.body
    assert sent.headers["x-title"] == "tests"


async def test_a_local_server_without_key_gets_the_placeholder(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Reply.say("Hi from a local model."))
    async with boot(engine, "openai", openai_server, name="ollama", environ={}) as services:
        stream = await collect_stream(engine, "ollama", request(model="qwen3"))
        check = await engine.trigger("provider::ollama::check", {})
        assert services[0].names == ["ollama"]
    assert stream.text == "Hi from a local model."
    assert openai_server.requests[0].api_key == "ollama"
    assert check == {
        "schema_version": 1, "provider": "ollama", "ready": True, "problem": None,
        "key_source": "none", "keys": 0, "base_url": openai_server.base_url,
    }  # fmt: skip


async def test_an_unreachable_local_server_is_named_with_how_to_start_it(engine: Engine) -> None:
    server = FakeOpenAIServer()
    await server.start()
    closed_url = server.base_url
    await server.close()  # nothing listens there now
    time = FakeTime()
    profile = {"base_url": closed_url}
    config = {"retry": {"max_retries": 1}}
    async with boot(engine, "openai", name="ollama", profile=profile, config=config, time=time):
        stream = await collect_stream(engine, "ollama", request())
        check = await engine.trigger("provider::ollama::check", {})
    error = stream.error
    assert error is not None
    assert error["kind"] == "transient"
    assert error["message"].startswith(f"cannot reach the ollama server at {closed_url}")
    assert "ollama serve" in error["message"]
    assert len(time.sleeps) == 1  # connection errors are retried
    assert check["ready"] is False
    assert "ollama serve" in check["problem"]


# -- failures and retries -----------------------------------------------------------------------


async def test_429_waits_retry_after_then_rotates_keys(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Reply.rate_limited(retry_after=2), Reply.say("Finally."))
    time = FakeTime()
    environ = {"TEST_API_KEY": "sk-one,sk-two"}
    async with boot(engine, "openai", openai_server, environ=environ, time=time):
        stream = await collect_stream(engine, "openai", request())
    assert stream.text == "Finally."
    assert time.sleeps == [2.0]
    assert [(r.status, r.api_key) for r in openai_server.requests] == [
        (429, "sk-one"),
        (200, "sk-two"),
    ]


async def test_5xx_backs_off_exponentially_with_jitter(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(
        Reply.server_error(), Reply.server_error(status=503), Reply.server_error(status=502),
        Reply.say("Up again."),
    )  # fmt: skip
    time = FakeTime(draw=0.5)
    config = {"retry": {"base_delay": 1.0, "jitter": 0.5, "max_retries": 3}}
    async with boot(engine, "openai", openai_server, config=config, time=time):
        stream = await collect_stream(engine, "openai", request())
    assert stream.text == "Up again."
    assert time.sleeps == [0.75, 1.5, 3.0]  # 1, 2, 4 less a quarter (jitter 0.5 x draw 0.5)
    assert [t for t in stream.types if t == "start"] == ["start"]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply.unauthorized("Incorrect API key provided"), "auth"),
        (Reply.status_error(403, "Country not supported"), "auth"),
        (Reply.context_overflow(), "context_overflow"),
        (Reply.status_error(404, "The model `gpt-9` does not exist"), "permanent"),
        (Reply.status_error(400, "Invalid value for 'tools'"), "permanent"),
        (Reply.status_error(408, "Request timeout"), "permanent"),
    ],
)
async def test_4xx_other_than_429_is_never_retried(
    engine: Engine, openai_server: FakeOpenAIServer, reply: Reply, kind: str
) -> None:
    openai_server.add(reply, reply)
    time = FakeTime()
    async with boot(engine, "openai", openai_server, time=time):
        stream = await collect_stream(engine, "openai", request())
        complete = AssistantMessage.model_validate(
            await engine.trigger("provider::openai::complete", request().model_dump(mode="json"))
        )
    error = stream.error
    assert error is not None
    assert error["kind"] == kind
    assert time.sleeps == []
    assert stream.types == ["start", "error"]
    assert (complete.stop_reason, complete.error_kind) == ("error", kind)
    assert complete.error_message == error["message"]
    assert len(openai_server.requests) == 2


async def test_retries_used_up_end_with_the_last_error(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.default = Reply.rate_limited("slow down", retry_after=1.5)
    time = FakeTime()
    async with boot(engine, "openai", openai_server, time=time):
        stream = await collect_stream(engine, "openai", request())
    assert stream.error == {
        "schema_version": 1,
        "type": "error",
        "kind": "rate_limited",
        "message": "HTTP 429 (requests): slow down",
        "retry_after": 1.5,
    }
    assert time.sleeps == [1.5, 1.5]  # two retries by default (seed 003)
    assert len(openai_server.requests) == 3


async def test_a_retry_after_beyond_the_cap_ends_the_call_at_once(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Reply.rate_limited(retry_after=3600))
    time = FakeTime()
    async with boot(engine, "openai", openai_server, time=time):
        stream = await collect_stream(engine, "openai", request())
    assert stream.error is not None
    assert (stream.error["kind"], stream.error["retry_after"]) == ("rate_limited", 3600.0)
    assert time.sleeps == []


async def test_the_fallback_model_gets_one_try_when_retries_are_used_up(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(
        Reply.server_error(), Reply.server_error(), Reply.say("From the small model.")
    )
    profile = {"fallback_model": "small-model"}
    config = {"retry": {"max_retries": 1}}
    async with boot(engine, "openai", openai_server, profile=profile, config=config):
        stream = await collect_stream(engine, "openai", request(model="big-model"))
    assert [r.model for r in openai_server.requests] == ["big-model", "big-model", "small-model"]
    message = stream.message
    assert message is not None
    assert (message.model, stream.text) == ("small-model", "From the small model.")


async def test_no_fallback_for_errors_the_model_cannot_fix(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Reply.unauthorized())
    profile = {"fallback_model": "small-model"}
    async with boot(engine, "openai", openai_server, profile=profile):
        stream = await collect_stream(engine, "openai", request(model="big-model"))
    assert stream.error is not None
    assert stream.error["kind"] == "auth"
    assert [r.model for r in openai_server.requests] == ["big-model"]


async def test_a_failed_fallback_reports_its_own_error(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Reply.server_error(), Reply.rate_limited("still busy", retry_after=9))
    profile = {"fallback_model": "small-model"}
    config = {"retry": {"max_retries": 0}}
    time = FakeTime()
    async with boot(engine, "openai", openai_server, profile=profile, config=config, time=time):
        stream = await collect_stream(engine, "openai", request())
    assert stream.error is not None
    assert (stream.error["kind"], stream.error["retry_after"]) == ("rate_limited", 9.0)
    assert time.sleeps == []


# -- broken streams -----------------------------------------------------------------------------

TEXT = Answer(text="The quick brown fox jumps over the lazy dog.", chunk=8)


@pytest.mark.parametrize(
    "reply",
    [
        Reply.disconnect(TEXT, after=3),
        Reply.malformed(TEXT, after=3),
        Reply.truncated(TEXT, after=3),
        Reply.stream_error(TEXT, after=3, message="The server is overloaded"),
    ],
    ids=["disconnect", "malformed", "truncated", "error_event"],
)
async def test_a_stream_broken_after_output_ends_with_an_error_frame(
    engine: Engine, openai_server: FakeOpenAIServer, reply: Reply
) -> None:
    openai_server.add(reply)
    time = FakeTime()
    async with boot(engine, "openai", openai_server, time=time):
        stream = await collect_stream(engine, "openai", request())
    assert stream.types == ["start", "text_delta", "text_delta", "error"]
    assert stream.text == "The quick brown "
    assert stream.error is not None
    assert stream.error["kind"] == "transient"
    assert stream.closed
    assert len(openai_server.requests) == 1  # never retried after partial output
    assert time.sleeps == []


@pytest.mark.parametrize("cut", ["disconnect", "malformed", "truncate"])
async def test_a_stream_broken_before_output_is_retried(
    engine: Engine, openai_server: FakeOpenAIServer, cut: Any
) -> None:
    openai_server.add(Reply(answer=TEXT, cut_after=1, cut=cut), Reply.say("Second try."))
    time = FakeTime()
    async with boot(engine, "openai", openai_server, time=time):
        stream = await collect_stream(engine, "openai", request())
    assert stream.text == "Second try."
    assert len(time.sleeps) == 1


async def test_a_cut_after_the_finish_reason_keeps_the_answer(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    answer = Answer(text="abc", chunk=10)  # role, text, finish, usage, [DONE]
    openai_server.add(Reply.disconnect(answer, after=3))
    async with boot(engine, "openai", openai_server):
        stream = await collect_stream(engine, "openai", request())
    assert stream.message is not None
    assert stream.text == "abc"


async def test_content_filter_is_a_permanent_error(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Answer(text="Sorry", stop="content_filter"))
    async with boot(engine, "openai", openai_server):
        stream = await collect_stream(engine, "openai", request())
    assert stream.error is not None
    assert stream.error["kind"] == "permanent"
    assert "content filter" in stream.error["message"]


async def test_length_stop_and_reasoning_field(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(
        Answer(text="Cut", thinking="think", reasoning_field="reasoning", stop="length")
    )
    async with boot(engine, "openai", openai_server):
        stream = await collect_stream(engine, "openai", request())
    assert stream.message is not None
    assert (stream.message.stop_reason, stream.thinking) == ("length", "think")


# -- keys, credentials, secrets -----------------------------------------------------------------


async def test_no_key_fails_fast_naming_what_to_set(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    async with boot(engine, "openai", openai_server, environ={}):
        stream = await collect_stream(engine, "openai", request())
        check = await engine.trigger("provider::openai::check", None)
    assert stream.error is not None
    assert stream.error["kind"] == "auth"
    assert "set TEST_API_KEY" in stream.error["message"]
    assert openai_server.requests == []
    assert check["ready"] is False
    assert check["problem"] == stream.error["message"]


async def test_the_credentials_worker_is_asked_first(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    async def get_token(payload: Any) -> dict[str, Any]:
        return {"schema_version": 1, "provider": payload["provider"], "token": "sk-vault",
                "source": "vault"}  # fmt: skip

    await engine.register_function("auth::get_token", get_token)
    openai_server.api_keys = frozenset({"sk-vault"})
    openai_server.add(Reply.say("ok"))
    async with boot(engine, "openai", openai_server):
        stream = await collect_stream(engine, "openai", request())
        check = await engine.trigger("provider::openai::check", {})
    assert stream.text == "ok"
    assert (check["key_source"], check["keys"]) == ("vault", 1)


CANARY = "sk-canary-5f1e0c2b9a7d4e3f"


async def test_the_key_never_appears_in_frames_messages_or_logs(
    engine: Engine, openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.add(
        Reply.unauthorized(f"Incorrect API key provided: {CANARY}"),
        Reply.server_error(f"upstream rejected {CANARY}"),
    )
    openai_server.default = Reply.server_error(f"still rejecting {CANARY}")
    caplog.set_level(logging.DEBUG)
    async with boot(engine, "openai", openai_server, environ={"TEST_API_KEY": CANARY}):
        stream = await collect_stream(engine, "openai", request())
        payload = request().model_dump(mode="json")
        complete = await engine.trigger("provider::openai::complete", payload)
        check = await engine.trigger("provider::openai::check", {})
    assert {r.api_key for r in openai_server.requests} == {CANARY}  # it was sent...
    assert stream.error is not None
    expected = "HTTP 401 (invalid_request_error): Incorrect API key provided: [redacted]"
    assert stream.error["message"] == expected
    assert complete["error_message"] == "HTTP 500 (server_error): still rejecting [redacted]"
    assert "upstream rejected [redacted]" in caplog.text  # the retry was logged, redacted
    seen = repr(stream.frames) + repr(complete) + repr(check) + caplog.text
    assert CANARY not in seen  # ...and never shown


async def test_a_token_bucket_spaces_requests(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Reply.say("one"), Reply.say("two"), Reply.say("three"))
    time = FakeTime()
    config = {"rate_limit": {"requests_per_minute": 30, "burst": 1}}
    async with boot(engine, "openai", openai_server, config=config, time=time):
        for _ in range(3):
            await collect_stream(engine, "openai", request())
    assert time.sleeps == [2.0, 2.0]


async def test_shipped_profiles_and_aliases_are_registered(engine: Engine) -> None:
    async with boot(engine, "openai", profile={"base_url": "http://127.0.0.1:9/v1"},
                    keep_shipped=True):  # fmt: skip
        functions = {f.function_id for f in await engine.list_functions()}
    for provider in ("openai", "ollama", "vllm", "lmstudio", "llamacpp", "deepseek", "moonshot",
                     "kimi", "openrouter"):  # fmt: skip
        for verb in ("stream", "complete", "check"):
            assert f"provider::{provider}::{verb}" in functions


async def test_a_reader_that_leaves_stops_the_stream(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    openai_server.add(Answer(text="many words " * 200, chunk=4))
    async with boot(engine, "openai", openai_server):
        channel = await engine.open_channel(capacity=1)
        payload = {**request().model_dump(mode="json"), "writer": channel.ref.to_json()}
        call = asyncio.create_task(engine.trigger("provider::openai::stream", payload))
        frames = [await anext(aiter(channel)) for _ in range(2)]
        await channel.aclose()
        result = await call
    assert [f["type"] for f in frames] == ["start", "text_delta"]
    assert result == {"schema_version": 1, "ok": False, "error": "the reader closed the channel"}
    assert len(openai_server.requests) == 1


def _raw(*chunks: dict[str, Any]) -> Reply:
    async def events(request: LoggedRequest) -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"

    return Reply(events=events)


async def test_whole_calls_in_one_chunk_and_a_reported_cost(
    engine: Engine, openai_server: FakeOpenAIServer
) -> None:
    """As Ollama and llama.cpp stream tool calls, and as OpenRouter reports cost."""
    calls = [
        {"id": "call_a", "index": 0, "type": "function",
         "function": {"name": "fs__read", "arguments": '{"path": "a"}'}},
        {"id": "call_b", "type": "function",
         "function": {"name": "calc__add", "arguments": '{"a": 1}'}},
    ]  # fmt: skip
    openai_server.add(
        _raw(
            {
                "id": "x",
                "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": calls}}],
            },
            {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {
                "id": "x",
                "choices": [],
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": 3,
                    "total_tokens": 13,
                    "cost": 0.0012,
                },
            },
        )
    )
    async with boot(engine, "openai", openai_server, name="ollama"):
        stream = await collect_stream(engine, "ollama", request())
    message = stream.message
    assert message is not None
    assert message.stop_reason == "function_call"
    assert [(c.id, c.tool_name, c.arguments) for c in message.function_calls()] == [
        ("call_a", "fs__read", {"path": "a"}),
        ("call_b", "calc__add", {"a": 1}),
    ]
    assert (message.usage.input_tokens, message.usage.cost_usd) == (10, 0.0012)
