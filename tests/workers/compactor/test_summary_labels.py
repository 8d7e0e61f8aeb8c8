"""A summary of untrusted text is untrusted: the compaction entry carries the label of what it
summarised (the injected instructions a page held may live on in the summary)."""

from __future__ import annotations

from pathlib import Path

from tackroom import Harness, ToolCall
from tackroom.contracts.context import ContextSettings
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    TextBlock,
    UserMessage,
)
from tackroom.contracts.provenance import Label, untrusted_label
from tackroom.contracts.sessions import (
    APPEND_BATCH,
    MESSAGES,
    AppendBatchRequest,
    BatchItem,
    MessagesRequest,
)
from tackroom.kit.compacting import compact_now
from tackroom.kit.context import summary_message
from tackroom.testing import FunctionModel, ModelInfo

FILLER = "Notes on the trip, the dates, the people and the places. " * 6


def model(messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
    return "The user is planning a trip." if "compact" in info.system_prompt else "ok"


def exchange(n: int, result: Label | None) -> list[AgentMessage]:
    call = FunctionCallBlock(id=f"c{n}", tool_name="http__fetch", arguments={"url": "x"})
    return [
        UserMessage.text(f"Turn {n}. {FILLER}"),
        AssistantMessage(content=[call]),
        FunctionResultMessage(
            function_call_id=f"c{n}",
            function_id="http::fetch",
            content=[TextBlock(text=FILLER)],
            label=result,
        ),
        AssistantMessage(content=[TextBlock(text="ok")]),
    ]


async def compacted(harness: Harness, session: str, *labels: Label | None) -> CustomMessage:
    entries = [message for n, label in enumerate(labels) for message in exchange(n, label)]
    await APPEND_BATCH.call(
        harness.bus,
        AppendBatchRequest(
            session_id=session, entries=[BatchItem(message=message) for message in entries]
        ),
    )
    settings = ContextSettings(keep_last=1)
    reply = await compact_now(
        harness.bus, session_id=session, provider="function", model="function", settings=settings
    )
    assert reply.compacted, reply.detail
    path = await MESSAGES.call(harness.bus, MessagesRequest(session_id=session))
    summary = path.messages[-1].message
    assert isinstance(summary, CustomMessage)
    return summary


async def test_a_summary_of_untrusted_results_is_untrusted(tmp_path: Path) -> None:
    async with Harness(FunctionModel(model), home=tmp_path) as harness:
        await harness.run("hello", session="s")
        mail = untrusted_label("mcp::mail::read", typed=True)
        summary = await compacted(harness, "s", None, untrusted_label("http::fetch"), mail)
        assert summary.label is not None
        assert (summary.label.untrusted, summary.label.typed) == (True, False)
        assert summary.label.origins == ["http::fetch", "mcp::mail::read"]
        assert summary_message(summary).label == summary.label  # what the model reads

        # A later summary folds this one in: still untrusted, though its own entries are not.
        again = await compacted(harness, "s", None, None)
        assert again.label == summary.label

        await harness.run("hello", session="clean")
        clean = await compacted(harness, "clean", None, None)
        assert clean.label is None
