"""Provider stream frames: typed and versioned on the wire, read back typed, one server piece."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.messages import AgentMessage, text_of
from tackroom.contracts.provider import (
    DoneEvent,
    MalformedFrame,
    TextDelta,
    read_frame,
    stream_function,
)
from tackroom.engine import Engine
from tackroom.engine.protocol import ChannelWriter
from tackroom.harness.models import model_worker
from tackroom.runtime.worker import WorkerContext
from tackroom.testing import FunctionModel, ModelInfo, ScriptedProvider, ScriptTurn
from tackroom.testing.contracts.provider import check_protocol
from tackroom.testing.fake_llm import FakeOpenAIServer, Reply
from tackroom.testing.scripted.collect import collect_stream
from tests.harness.test_model_answer_limits import no_traceback_logged, raw_provider, run_with
from tests.providers.helpers import boot, request


def test_a_frame_is_read_typed_and_what_cannot_be_used_is_skipped() -> None:
    frame = read_frame({"type": "text_delta", "delta": "hi"})
    assert frame == TextDelta(delta="hi", schema_version=1)  # no version sent: version 1
    assert read_frame({"type": "tool_progress", "percent": 50}) is None  # a newer provider's
    assert read_frame({"type": "text_delta"}) is None  # a delta shows; the done frame counts
    assert read_frame("not a frame") is None
    with pytest.raises(MalformedFrame, match=r"malformed done frame: message.stop_reason"):
        read_frame({"type": "done", "message": {"role": "assistant", "stop_reason": "later"}})
    with pytest.raises(MalformedFrame, match=r"malformed error frame: kind"):
        read_frame({"type": "error", "kind": "oops", "message": "x"})


@pytest.fixture
async def python_model(engine: Engine) -> AsyncIterator[str]:
    """A Python model object served as provider ``fn`` (``harness.models``)."""

    def answer(messages: list[AgentMessage], info: ModelInfo) -> str:
        return "typed frames"

    model = FunctionModel(answer)
    spec = model_worker(model, model_name="fn-model")
    ctx: WorkerContext[Any] = WorkerContext(engine=engine, name=spec.name, config=None)
    await spec.start(ctx)
    yield model.name
    await ctx.close()


async def test_every_server_sends_versioned_frames_through_one_piece(
    engine: Engine, python_model: str, openai_server: FakeOpenAIServer
) -> None:
    scripted = ScriptedProvider([ScriptTurn.say("typed frames")], name="scripted")
    await scripted.register(engine)
    openai_server.default = Reply.say("typed frames")
    async with boot(engine, "openai", openai_server):
        for provider, model in (
            (python_model, "fn-model"),
            ("scripted", "test-model"),
            ("openai", "test-model"),
        ):
            stream = await collect_stream(engine, provider, request())
            check_protocol(stream, provider=provider, model=model)
            assert {frame["schema_version"] for frame in stream.frames} == {1}, provider
            assert stream.text == "typed frames"
    await scripted.unregister()


async def test_a_request_that_does_not_parse_gets_an_error_frame_from_every_server(
    engine: Engine, python_model: str
) -> None:
    scripted = ScriptedProvider([], name="scripted")
    await scripted.register(engine)
    for provider in (python_model, "scripted"):
        channel = await engine.open_channel(capacity=16)
        payload = request().model_dump(mode="json")
        payload.update(writer=channel.ref.to_json(), messages="not a list")
        await engine.trigger(stream_function(provider).id, payload)
        frames = [frame async for frame in channel]
        assert [frame["type"] for frame in frames] == ["start", "error"], provider
        assert frames[-1]["kind"] == "permanent"
        assert "invalid request: messages" in frames[-1]["message"]
        complete = await engine.trigger(f"provider::{provider}::complete", payload)
        assert complete["stop_reason"] == "error"
        assert "invalid request: messages" in complete["error_message"]
    await scripted.unregister()


async def test_the_turn_reads_frames_typed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An unknown frame is skipped, a frame without a version is version 1, and a done frame
    that does not parse ends the turn with what is wrong with it."""
    caplog.set_level(logging.INFO)

    async def fine(writer: ChannelWriter) -> None:
        await writer.send({"type": "tool_progress", "percent": 50})
        await writer.send({"type": "text_delta", "delta": "old "})
        message = {"role": "assistant", "content": [{"type": "text", "text": "old provider"}]}
        await writer.send({"type": "done", "message": {**message, "stop_reason": "end"}})
        await writer.close()

    result = await run_with("raw:m", tmp_path, workers=[raw_provider(fine)], check_model=False)
    assert result.ok, result.error
    assert result.output == "old provider"

    async def malformed(writer: ChannelWriter) -> None:
        await writer.send({"type": "done", "message": {"role": "assistant", "stop_reason": 3}})
        await writer.close()

    result = await run_with(
        "raw:m", tmp_path / "2", workers=[raw_provider(malformed)], check_model=False
    )
    assert result.stop_reason == "error"
    assert result.error is not None
    assert "the provider sent a malformed done frame: message.stop_reason" in result.error
    no_traceback_logged(caplog)


def test_a_done_frame_carries_the_message_typed() -> None:
    frame = read_frame(
        {
            "schema_version": 1,
            "type": "done",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "x"}],
                        "stop_reason": "end"},
        }
    )  # fmt: skip
    assert isinstance(frame, DoneEvent)
    assert text_of(frame.message.content) == "x"
