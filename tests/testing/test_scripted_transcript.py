"""The scripted provider's ``transcript`` cursor (turns picked from the request) and stalls."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tackroom.contracts.messages import AssistantMessage, TextBlock, UserMessage
from tackroom.contracts.provider import ProviderRequest
from tackroom.engine import ChannelAborted, Engine, InvocationTimeout
from tackroom.runtime import ConfigError, HarnessConfig, Host
from tackroom.testing import ScriptAssertionError, ScriptedProvider, ScriptTurn, collect_stream
from tackroom.testing.engines import MEMORY_URL
from tackroom.testing.scripted import Script, status_function

SCRIPT = Script(
    [
        ScriptTurn.say("zero", expect={"last_role": "user"}),
        ScriptTurn.say("one"),
        ScriptTurn.say("two"),
    ]
)


def after(assistant_turns: int, *, session_id: str | None = "s-1") -> ProviderRequest:
    """A request whose transcript holds ``assistant_turns`` assistant messages."""
    messages: list[Any] = [UserMessage.text("start")]
    for n in range(assistant_turns):
        messages.append(AssistantMessage(content=[TextBlock(text=f"answer {n}")]))
        messages.append(UserMessage.text(f"more {n}"))
    return ProviderRequest(model="m", messages=messages, session_id=session_id)


async def texts(engine: Engine, *requests: ProviderRequest) -> list[str]:
    return [(await collect_stream(engine, "scripted", r)).text for r in requests]


async def test_the_transcript_picks_the_turn(engine: Engine) -> None:
    provider = ScriptedProvider(SCRIPT, cursor="transcript")
    await provider.register(engine)
    assert await texts(engine, after(1), after(0), after(1), after(2)) == [
        "one",
        "zero",
        "one",
        "two",
    ]
    assert provider.violations == []
    provider.assert_consumed()


async def test_a_restarted_provider_goes_on_where_the_transcript_stands(engine: Engine) -> None:
    first = ScriptedProvider(SCRIPT, cursor="transcript")
    await first.register(engine)
    assert await texts(engine, after(0)) == ["zero"]
    await first.unregister()

    restarted = ScriptedProvider(SCRIPT, cursor="transcript")
    await restarted.register(engine)
    # the interrupted call is asked again, then the run goes on
    assert await texts(engine, after(0), after(1), after(2)) == ["zero", "one", "two"]
    restarted.assert_consumed()


async def test_calls_mode_replays_from_the_first_turn_after_a_restart(engine: Engine) -> None:
    """The default cursor lives in memory: why the crash tests need ``transcript``."""
    first = ScriptedProvider(SCRIPT)
    await first.register(engine)
    assert await texts(engine, after(0)) == ["zero"]
    await first.unregister()
    restarted = ScriptedProvider(SCRIPT)
    await restarted.register(engine)
    assert await texts(engine, after(1)) == ["zero"]  # the first turn again, not "one"


async def test_unserved_turns_and_past_the_end(engine: Engine) -> None:
    provider = ScriptedProvider(SCRIPT, cursor="transcript")
    await provider.register(engine)
    assert await texts(engine, after(0)) == ["zero"]
    with pytest.raises(ScriptAssertionError, match="2 turn"):
        provider.assert_consumed()

    stream = await collect_stream(engine, "scripted", after(3))
    assert stream.error is not None
    assert "a request with 3 assistant message(s) was not expected" in stream.error["message"]
    assert "the script has 3 turn(s)" in stream.error["message"]
    assert len(provider.violations) == 1


async def test_expect_is_checked_against_the_chosen_turn(engine: Engine) -> None:
    script = Script(
        [ScriptTurn.say("zero"), ScriptTurn.say("one", expect={"last_user_contains": "more 0"})]
    )
    provider = ScriptedProvider(script, cursor="transcript")
    await provider.register(engine)
    assert await texts(engine, after(1)) == ["one"]
    request = after(1)
    request.messages[-1] = UserMessage.text("something else")
    stream = await collect_stream(engine, "scripted", request)
    assert stream.error is not None
    assert "step 2: request does not match expect" in stream.error["message"]
    assert len(provider.violations) == 1


async def test_per_session_and_keyed_sequences(engine: Engine) -> None:
    script = Script(
        [
            {"text": "shared 0"},
            {"text": "shared 1"},
            {"session": "alice", "text": "alice 0"},
            {"session": "alice", "text": "alice 1"},
        ]
    )
    provider = ScriptedProvider(script, per_session=True, cursor="transcript")
    await provider.register(engine)
    got = await asyncio.gather(
        *(
            texts(engine, after(1, session_id=sid), after(0, session_id=sid))
            for sid in ("alice", "bob", "carol")
        )
    )
    assert got == [["alice 1", "alice 0"], ["shared 1", "shared 0"], ["shared 1", "shared 0"]]
    provider.assert_consumed()
    stream = await collect_stream(engine, "scripted", after(0, session_id=None))
    assert stream.error is not None
    assert "no session_id" in stream.error["message"]


async def test_complete_uses_the_transcript_too(engine: Engine) -> None:
    provider = ScriptedProvider(SCRIPT, cursor="transcript")
    await provider.register(engine)
    raw = await engine.trigger("provider::scripted::complete", after(2).model_dump(mode="json"))
    assert AssistantMessage.model_validate(raw).content == [TextBlock(text="two")]


def test_an_unknown_cursor_is_refused() -> None:
    with pytest.raises(ValueError, match="cursor must be"):
        ScriptedProvider(SCRIPT, cursor="random")  # type: ignore[arg-type]


async def test_config_section_selects_the_transcript_cursor() -> None:
    config = HarnessConfig(
        schema_version=1,
        engine=MEMORY_URL,
        workers=["scripted"],
        worker_config={
            "scripted": {"script": [{"text": "a"}, {"text": "b"}], "cursor": "transcript"}
        },
    )
    async with Host.from_config(config) as host:
        assert await texts(host.engine, after(1), after(1), after(0)) == ["b", "b", "a"]
        status = await host.engine.trigger(status_function("scripted"))
        assert status["consumed"] is True
        assert status["calls"] == 3


def test_config_refuses_an_unknown_cursor() -> None:
    config = HarnessConfig(
        schema_version=1,
        engine=MEMORY_URL,
        workers=["scripted"],
        worker_config={"scripted": {"script": [], "cursor": "random"}},
    )
    with pytest.raises(ConfigError, match="cursor"):
        Host.from_config(config)


# -- stall_after_frames ---------------------------------------------------------------------------
async def stalled_frames(engine: Engine, provider: ScriptedProvider) -> list[Any]:
    """Stream ``after(0)`` with a short call timeout; the frames sent before the stall."""
    await provider.register(engine)
    channel = await engine.open_channel()
    payload = after(0).model_dump(mode="json") | {"writer": channel.ref.to_json()}
    frames: list[Any] = []

    async def read() -> None:
        async for frame in channel:
            frames.append(frame)

    reader = asyncio.create_task(read())
    with pytest.raises(InvocationTimeout):
        await engine.trigger("provider::scripted::stream", payload, timeout=0.3)
    with pytest.raises(ChannelAborted, match="stopped mid-stream"):
        await asyncio.wait_for(reader, 5)
    return frames


async def test_a_stalled_stream_sends_its_first_frames_then_hangs(engine: Engine) -> None:
    turn = ScriptTurn.say("one two three four", stall_after_frames=2)
    frames = await stalled_frames(engine, ScriptedProvider(Script([turn])))
    assert [f["type"] for f in frames] == ["start", "text_delta", "text_delta"]
    assert "".join(f["delta"] for f in frames[1:]) == "one two "


async def test_a_stall_past_the_last_frame_withholds_only_done(engine: Engine) -> None:
    provider = ScriptedProvider(
        Script([ScriptTurn.say("hi", stall_after_frames=99)]), cursor="transcript"
    )
    frames = await stalled_frames(engine, provider)
    assert [f["type"] for f in frames] == ["start", "text_delta", "usage", "stop"]
    with pytest.raises(InvocationTimeout):
        await engine.trigger(
            "provider::scripted::complete", after(0).model_dump(mode="json"), timeout=0.3
        )


def test_stall_after_frames_is_validated() -> None:
    with pytest.raises(ValueError, match="stall_after_frames"):
        ScriptTurn.say("x", stall_after_frames=-1)
