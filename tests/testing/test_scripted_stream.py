"""The scripted provider's stream through a real channel: frames, strictness, sessions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from tackroom.contracts.messages import FunctionCallBlock, TextBlock, ThinkingBlock
from tackroom.contracts.provider import provider_event_adapter
from tackroom.engine import ChannelAborted, Engine, InvocationError, InvocationTimeout
from tackroom.testing import (
    ScriptAssertionError,
    ScriptedProvider,
    ScriptTurn,
    collect_stream,
)
from tackroom.testing.scripted import Script
from tests.testing.helpers import request


@pytest.fixture
async def served(engine: Engine) -> AsyncIterator[list[ScriptedProvider]]:
    """Providers appended here are unregistered after the test."""
    providers: list[ScriptedProvider] = []
    yield providers
    for provider in providers:
        await provider.unregister()


async def serve(engine: Engine, script: Script, **options: object) -> ScriptedProvider:
    provider = ScriptedProvider(script, **options)  # type: ignore[arg-type]
    await provider.register(engine)
    return provider


async def test_text_turn_streams_in_order(engine: Engine) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 4
    script = Script(
        [
            ScriptTurn.say(
                text,
                thinking="Let me think about foxes.",
                thinking_signature="sig-1",
                usage={"input_tokens": 7, "output_tokens": 40},
                deltas=10,
            )
        ]
    )
    provider = await serve(engine, script)
    stream = await collect_stream(engine, "scripted", request("tell me"))

    assert stream.result == {"schema_version": 1, "ok": True}
    assert stream.closed
    assert stream.aborted is None
    for frame in stream.frames:
        provider_event_adapter.validate_python(frame)
    types = stream.types
    assert types[0] == "start"
    assert types[-1] == "done"
    assert types[1:-1] == ["thinking_delta"] * 10 + ["text_delta"] * 10 + ["usage", "stop"]
    assert stream.frames[0] == {
        "schema_version": 1,
        "type": "start",
        "provider": "scripted",
        "model": "test-model",
    }
    assert stream.thinking == "Let me think about foxes."
    assert stream.frames[10]["signature"] == "sig-1"
    assert all(f["signature"] is None for f in stream.frames[1:10])
    assert stream.text == text
    assert stream.frames[-3]["usage"]["output_tokens"] == 40
    assert stream.frames[-2] == {"schema_version": 1, "type": "stop", "stop_reason": "end"}
    message = stream.message
    assert message is not None
    assert message.content == [
        ThinkingBlock(text="Let me think about foxes.", signature="sig-1"),
        TextBlock(text=text),
    ]
    assert (message.provider, message.model, message.stop_reason) == (
        "scripted",
        "test-model",
        "end",
    )
    assert message.usage.input_tokens == 7
    provider.assert_consumed()
    assert [r.messages[0].content for r in provider.requests] == [[TextBlock(text="tell me")]]


async def test_tool_calls_reassemble(engine: Engine) -> None:
    arguments = {"path": "notes/today.md", "lines": [1, 2, 3], "note": "ünïcode ok"}
    script = Script(
        [
            ScriptTurn.model_validate(
                {
                    "text": "Reading two files.",
                    "tool_calls": [
                        {"function_id": "fs::read", "arguments": arguments},
                        {"name": "calc__add", "arguments": {"a": 1, "b": 2}, "id": "mine"},
                    ],
                    "argument_deltas": 4,
                }
            )
        ]
    )
    provider = await serve(engine, script)
    stream = await collect_stream(engine, "scripted", request())

    calls = stream.tool_calls()
    assert calls == [
        {"index": 0, "id": "call_1_0", "name": "fs__read", "arguments": arguments},
        {"index": 1, "id": "mine", "name": "calc__add", "arguments": {"a": 1, "b": 2}},
    ]
    deltas = [f for f in stream.frames if f["type"] == "function_call_delta"]
    # id and name come first, alone; then the argument pieces.
    assert deltas[0] == {
        "schema_version": 1,
        "type": "function_call_delta",
        "index": 0,
        "id": "call_1_0",
        "name": "fs__read",
        "arguments_delta": "",
    }
    assert [d["index"] for d in deltas] == [0] * 5 + [1] * 5
    assert "".join(d["arguments_delta"] for d in deltas[1:5]) == json.dumps(
        arguments, ensure_ascii=False
    )
    assert stream.frames[-2] == {
        "schema_version": 1,
        "type": "stop",
        "stop_reason": "function_call",
    }
    message = stream.message
    assert message is not None
    assert message.stop_reason == "function_call"
    assert message.function_calls() == [
        FunctionCallBlock(id="call_1_0", tool_name="fs__read", arguments=arguments),
        FunctionCallBlock(id="mine", tool_name="calc__add", arguments={"a": 1, "b": 2}),
    ]
    provider.assert_consumed()


async def test_error_turn_sends_error_instead_of_done(engine: Engine) -> None:
    script = Script(
        [ScriptTurn.fail("rate_limited", "slow down", retry_after=1.5, text="partial answer")]
    )
    provider = await serve(engine, script)
    stream = await collect_stream(engine, "scripted", request())

    assert stream.types == ["start", "text_delta", "text_delta", "usage", "error"]
    assert stream.error == {
        "schema_version": 1,
        "type": "error",
        "kind": "rate_limited",
        "message": "slow down",
        "retry_after": 1.5,
    }
    assert stream.message is None
    assert stream.closed
    assert stream.result["ok"] is True
    provider.assert_consumed()  # a scripted error is part of the script, not a violation


async def test_call_after_the_script_is_a_violation(engine: Engine) -> None:
    provider = await serve(engine, Script([ScriptTurn.say("only one")]))
    await collect_stream(engine, "scripted", request())
    stream = await collect_stream(engine, "scripted", request())

    assert stream.types == ["start", "error"]
    assert stream.error is not None
    assert stream.error["kind"] == "permanent"
    assert "call 2 was not expected" in stream.error["message"]
    assert stream.closed
    assert len(provider.violations) == 1
    assert provider.violations[0].call == 2
    with pytest.raises(ScriptAssertionError, match="call 2 was not expected"):
        provider.assert_consumed()


async def test_unconsumed_turns_fail_assert_consumed(engine: Engine) -> None:
    provider = await serve(engine, Script([ScriptTurn.say("one"), ScriptTurn.say("two")]))
    with pytest.raises(ScriptAssertionError, match="2 turn"):
        provider.assert_consumed()
    await collect_stream(engine, "scripted", request())
    with pytest.raises(ScriptAssertionError, match="1 turn"):
        provider.assert_consumed()
    assert provider.remaining() == {None: 1}
    await collect_stream(engine, "scripted", request())
    provider.assert_consumed()


async def test_expect_matches_and_mismatches(engine: Engine) -> None:
    script = Script.from_yaml(
        """
- expect:
    last_user_contains: weather
    tools_include: [fs::read, clock__now]
    tools_exclude: [fs::write]
    model: test-model
    last_role: user
  tool_calls: [{function_id: fs::read, arguments: {path: w.txt}, id: r1}]
- expect: {has_function_result_for: r1, last_role: function_result}
  text: Sunny.
- expect: {last_user_contains: never said}
  text: unreachable
"""
    )
    provider = await serve(engine, script)
    first = await collect_stream(
        engine, "scripted", request("what is the weather", tools=["fs::read", "clock::now"])
    )
    assert first.message is not None
    second = await collect_stream(engine, "scripted", request("weather", results_for=["r1"]))
    assert second.text == "Sunny."
    third = await collect_stream(engine, "scripted", request("something else"))
    assert third.error is not None
    assert third.error["kind"] == "permanent"
    assert "step 3" in third.error["message"]
    assert "does not contain 'never said'" in third.error["message"]
    assert [v.step for v in provider.violations] == [3]
    with pytest.raises(ScriptAssertionError, match="does not match expect"):
        provider.assert_consumed()


async def test_expect_reports_every_problem(engine: Engine) -> None:
    script = Script([{"expect": {"tools_include": ["fs::read"], "has_function_result_for": ["x"]}}])
    provider = await serve(engine, script)
    stream = await collect_stream(engine, "scripted", request())
    assert stream.error is not None
    assert "['fs::read'] not offered" in stream.error["message"]
    assert "no function result for ['x']" in stream.error["message"]
    assert len(provider.violations) == 1


async def test_per_session_cursors_with_100_concurrent_sessions(engine: Engine) -> None:
    script = Script(
        [
            ScriptTurn.call("calc::add", {"a": 1, "b": 2}),
            {"text": "three", "expect": {"has_function_result_for": "call_1_0"}},
        ],
        deltas=50,
    )
    provider = await serve(engine, script, per_session=True)

    async def session(n: int) -> tuple[str, str]:
        first = await collect_stream(engine, "scripted", request(session_id=f"s{n}"))
        second = await collect_stream(
            engine, "scripted", request(session_id=f"s{n}", results_for=["call_1_0"])
        )
        return first.tool_calls()[0]["name"], second.text

    results = await asyncio.gather(*(session(n) for n in range(100)))
    assert results == [("calc__add", "three")] * 100
    assert len(provider.sessions_started) == 100
    assert provider.calls == 200
    provider.assert_consumed()


async def test_per_session_needs_a_session_id(engine: Engine) -> None:
    provider = await serve(engine, Script([ScriptTurn.say("x")]), per_session=True)
    stream = await collect_stream(engine, "scripted", request(session_id=None))
    assert stream.error is not None
    assert "no session_id" in stream.error["message"]
    with pytest.raises(ScriptAssertionError, match="no call reached the script"):
        provider.assert_consumed()


async def test_keyed_sessions_and_shared_sequence(engine: Engine) -> None:
    script = Script(
        [
            {"session": "alice", "text": "hi alice"},
            {"text": "shared 1"},
            {"session": "bob", "text": "hi bob"},
            {"text": "shared 2"},
        ]
    )
    provider = await serve(engine, script)
    texts = [
        (await collect_stream(engine, "scripted", request(session_id=sid))).text
        for sid in ["bob", "carol", "alice", "dave"]
    ]
    assert texts == ["hi bob", "shared 1", "hi alice", "shared 2"]
    provider.assert_consumed()


async def test_keyed_session_never_called_is_unconsumed(engine: Engine) -> None:
    provider = await serve(engine, Script([{"session": "alice", "text": "hi"}]))
    with pytest.raises(ScriptAssertionError, match="session alice"):
        provider.assert_consumed()


async def test_delays_use_the_injected_sleep(engine: Engine) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    script = Script([ScriptTurn.say("a b", delay=2.0, delay_between_frames=0.25)])
    provider = ScriptedProvider(script, sleep=fake_sleep)
    await provider.register(engine)
    stream = await collect_stream(engine, "scripted", request())
    # one delay, then a gap before each of: 2 text deltas, usage, stop, done.
    assert slept == [2.0] + [0.25] * 5
    assert stream.text == "a b"


async def test_invalid_request_is_a_violation(engine: Engine) -> None:
    provider = await serve(engine, Script([ScriptTurn.say("x")]))
    channel = await engine.open_channel()
    payload = {"model": "m", "messages": [{"role": "robot"}], "writer": channel.ref.to_json()}
    result = await engine.trigger("provider::scripted::stream", payload)
    frames = [frame async for frame in channel]
    assert result == {"schema_version": 1, "ok": True}
    assert [f["type"] for f in frames] == ["start", "error"]
    assert "invalid request" in frames[1]["message"]
    assert provider.violations
    assert provider.remaining() == {None: 1}


async def test_missing_writer_is_an_invalid_request(engine: Engine) -> None:
    await serve(engine, Script([ScriptTurn.say("x")]))
    payload = request().model_dump(mode="json")
    with pytest.raises(InvocationError) as caught:
        await engine.trigger("provider::scripted::stream", payload)
    assert caught.value.remote_code == "invalid_request"


async def test_reader_going_away_stops_the_stream(engine: Engine) -> None:
    provider = await serve(engine, Script([ScriptTurn.say("word " * 100, deltas=100)]))
    channel = await engine.open_channel(capacity=1)
    payload = {**request().model_dump(mode="json"), "writer": channel.ref.to_json()}
    call = asyncio.create_task(engine.trigger("provider::scripted::stream", payload))
    first = await anext(aiter(channel))
    assert first["type"] == "start"
    await channel.aclose()
    result = await call
    assert result["ok"] is False
    assert "reader closed" in result["error"]
    assert provider.calls == 1


async def test_cancelled_stream_aborts_the_channel(engine: Engine) -> None:
    script = Script([ScriptTurn.say("a b c", delay_between_frames=5.0)])
    await serve(engine, script)
    channel = await engine.open_channel()
    payload = {**request().model_dump(mode="json"), "writer": channel.ref.to_json()}
    with pytest.raises(InvocationTimeout):
        await engine.trigger("provider::scripted::stream", payload, timeout=0.05)
    assert (await anext(aiter(channel)))["type"] == "start"
    with pytest.raises(ChannelAborted, match="stopped mid-stream"):
        await anext(aiter(channel))
