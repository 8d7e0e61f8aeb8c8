"""A model answer nested too deeply ends the turn with a reason, never with a traceback."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness, ToolCall
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, text_of
from tackroom.contracts.provider import ProviderRequest, stream_function
from tackroom.engine.jsonvalue import MAX_CONTENT_DEPTH, MAX_VALUE_BYTES
from tackroom.engine.protocol import ChannelRef, ChannelWriter
from tackroom.runtime import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.testing import FunctionModel, ModelInfo


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def no_traceback_logged(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        assert record.exc_info is None, f"{record.name}: {record.getMessage()}"
        assert "ExceptionGroup" not in record.getMessage()


async def run_with(model: Any, home: Path, **options: Any) -> Any:
    harness = Harness(model, home=home, **options)

    @harness.tool
    def take(a: Any) -> str:
        """Take anything."""
        return "taken"

    async with harness:
        return await harness.run("go")


@pytest.mark.parametrize(
    "arguments",
    [
        {"a": nested(300)},
        {"a": nested(MAX_CONTENT_DEPTH)},
        "{" + '"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["300-deep", "one-too-deep", "100000-deep-text"],
)
async def test_tool_arguments_nested_too_deeply_fail_the_turn_with_a_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, arguments: dict[str, Any] | str
) -> None:
    caplog.set_level(logging.INFO)

    def answer(messages: list[AgentMessage], info: ModelInfo) -> ToolCall:
        return ToolCall("take", arguments)

    result = await run_with(FunctionModel(answer), tmp_path)
    assert not result.ok
    assert result.stop_reason == "error"
    assert result.error is not None
    assert f"nests deeper than {MAX_CONTENT_DEPTH} levels" in result.error
    no_traceback_logged(caplog)


async def test_arguments_at_the_content_limit_still_reach_the_tool(tmp_path: Path) -> None:
    replies: Iterator[ToolCall | str] = iter(
        [ToolCall("take", {"a": nested(MAX_CONTENT_DEPTH - 1)}), "done"]
    )
    result = await run_with(FunctionModel(lambda m, i: next(replies)), tmp_path)
    assert result.ok, result.error
    assert result.output == "done"


Frames = Callable[[ChannelWriter], Awaitable[None]]


def raw_provider(frames: Frames) -> WorkerSpec[WorkerConfig]:
    """A provider worker that writes ``frames`` itself, as a provider not built on the kit may."""

    async def start(ctx: WorkerContext[WorkerConfig]) -> None:
        async def stream(payload: Any) -> dict[str, Any]:
            request = ProviderRequest.model_validate(payload)
            assert request.writer is not None
            writer = ctx.engine.channel_writer(ChannelRef.from_json(request.writer))
            await frames(writer)
            return {"schema_version": 1, "ok": True}

        await ctx.register_function(stream_function("raw").id, stream)

    return WorkerSpec(name="raw", description="raw frames", config_model=WorkerConfig, start=start)


async def test_a_done_frame_with_arguments_too_deep_is_refused_by_the_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    call = {"type": "function_call", "id": "c1", "tool_name": "take"}

    async def frames(writer: ChannelWriter) -> None:
        message = {
            "role": "assistant",
            "content": [{**call, "arguments": {"a": nested(MAX_CONTENT_DEPTH + 10)}}],
            "stop_reason": "function_call",
        }
        await writer.send({"type": "done", "message": message})
        await writer.close()

    result = await run_with("raw:m", tmp_path, workers=[raw_provider(frames)], check_model=False)
    assert result.stop_reason == "error"
    assert result.error is not None
    assert f"nests deeper than {MAX_CONTENT_DEPTH} levels" in result.error
    no_traceback_logged(caplog)


async def test_a_provider_that_aborts_its_stream_fails_the_turn_with_its_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)

    async def frames(writer: ChannelWriter) -> None:
        await writer.send({"type": "text_delta", "delta": "I was saying"})
        await writer.abort("the model's socket broke")

    result = await run_with("raw:m", tmp_path, workers=[raw_provider(frames)], check_model=False)
    assert result.stop_reason == "error"
    assert result.error is not None
    assert "the model's socket broke" in result.error
    no_traceback_logged(caplog)


@pytest.mark.parametrize(
    ("returned", "reason"),
    [
        (nested(MAX_CONTENT_DEPTH + 60), f"nests deeper than {MAX_CONTENT_DEPTH} levels"),
        ("x" * (MAX_VALUE_BYTES // 4 + 1), "bytes, more than the"),
    ],
    ids=["nested", "huge"],
)
async def test_a_tool_result_the_turn_cannot_keep_is_an_error_the_model_reads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, returned: Any, reason: str
) -> None:
    caplog.set_level(logging.INFO)
    replies: Iterator[ToolCall | str] = iter([ToolCall("produce", {}), "done"])
    harness = Harness(FunctionModel(lambda m, i: next(replies)), home=tmp_path)

    @harness.tool
    def produce() -> Any:
        """Return something the turn cannot keep."""
        return returned

    async with harness:
        result = await harness.run("go")
    assert result.ok, result.error
    assert result.output == "done"
    (tool_result,) = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert tool_result.is_error
    assert reason in text_of(tool_result.content)
    no_traceback_logged(caplog)
