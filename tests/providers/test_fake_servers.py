"""The fake servers with the official SDKs alone: both wire formats, streamed and not, errors."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tackroom.testing.fake_llm import (
    Answer,
    FakeAnthropicServer,
    FakeOpenAIServer,
    FakeToolCall,
    FakeUsage,
    Reply,
)

ANSWER = Answer(
    text="Let me check the weather.",
    thinking="Hmm.",
    tool_calls=[FakeToolCall("get_weather", {"city": "Paris", "unit": "c"})],
    usage=FakeUsage(input_tokens=42, output_tokens=17, cache_read_tokens=8, cache_write_tokens=3),
    chunk=5,
)


async def test_openai_streamed_and_not(openai_server: FakeOpenAIServer) -> None:
    openai_server.add(ANSWER, ANSWER)
    client = openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="sk-x", max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-fake",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, arguments, usage, finish = "", "", None, None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                arguments += (call.function.arguments or "") if call.function else ""
            finish = choice.finish_reason or finish
    assert (text, arguments, finish) == (
        ANSWER.text,
        '{"city": "Paris", "unit": "c"}',
        "tool_calls",
    )
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (50, 17)
    whole = await client.chat.completions.create(
        model="gpt-fake", messages=[{"role": "user", "content": "hi"}]
    )
    message = whole.choices[0].message
    assert message.content == ANSWER.text
    assert message.tool_calls is not None
    assert whole.model == "gpt-fake"
    await client.close()


async def test_anthropic_streamed_and_not(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.add(ANSWER, ANSWER)
    client = anthropic.AsyncAnthropic(
        base_url=anthropic_server.base_url, api_key="sk-ant", max_retries=0
    )
    async with client.messages.stream(
        model="claude-fake", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = await stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text", "tool_use"]
    assert final.stop_reason == "tool_use"
    assert (final.usage.cache_read_input_tokens, final.usage.cache_creation_input_tokens) == (8, 3)
    whole = await client.messages.create(
        model="claude-fake", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert [block.type for block in whole.content] == ["thinking", "text", "tool_use"]
    await client.close()


async def test_keys_routes_and_violations() -> None:
    async with FakeOpenAIServer(api_keys={"sk-good"}, models=["m1", "m2"]) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-bad", max_retries=0)
        with pytest.raises(openai.AuthenticationError, match="sk-bad"):
            await client.chat.completions.create(model="m", messages=[])
        good = client.with_options(api_key="sk-good")
        assert [m.id async for m in good.models.list()] == ["m1", "m2"]
        with pytest.raises(openai.InternalServerError):
            await good.chat.completions.create(model="m", messages=[])  # nothing queued
        assert server.violations == ["request 3 had no scripted reply"]
        server.add(Reply.rate_limited(retry_after=7))
        with pytest.raises(openai.RateLimitError) as caught:
            await good.chat.completions.create(model="m", messages=[])
        assert caught.value.response.headers["retry-after"] == "7"
        await server.wait_for_requests(4)
        assert [r.status for r in server.requests] == [401, 200, 500, 429]
        await client.close()
