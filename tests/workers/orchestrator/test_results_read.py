"""A 1 MiB ``fs::read`` result reaches the model clipped to the limit, the model reads the rest
with ``results::read`` (offsets from the clip note), and the session tree keeps all of it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness, ToolCall
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, TextBlock, text_of
from tackroom.contracts.results import MAX_PAGE_CHARS
from tackroom.engine import InvocationError
from tackroom.testing import FunctionModel, ModelInfo
from tackroom.workers.orchestrator.clipping import DEFAULT_MAX_RESULT_CHARS

MIB = 1024 * 1024
NOTE = re.compile(r'call results__read with entry_id="([^"]+)" offset=(\d+) to read more')


def big_text() -> str:
    """Exactly 1 MiB of numbered lines (the ``files`` worker's default read limit)."""
    lines = "".join(f"{i:07d} the quick brown fox jumps over the lazy dog\n" for i in range(MIB))
    return lines[:MIB]


def only_text(message: FunctionResultMessage) -> str:
    [block] = message.content
    assert isinstance(block, TextBlock)
    return block.text


class Reader:
    """A model that reads ``big.txt`` and then pages through the clipped result to its end."""

    def __init__(self) -> None:
        self.pages: list[str] = []
        self.entry_id = ""

    def __call__(self, messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
        last = messages[-1]
        if not isinstance(last, FunctionResultMessage):
            return ToolCall("fs__read", {"path": "big.txt"})
        assert not last.is_error, text_of(last.content)
        if last.function_id == "fs::read":
            match = NOTE.search(only_text(last))
            assert match is not None
            self.entry_id, offset = match.group(1), int(match.group(2))
            self.pages.append(only_text(last)[: match.start()].rsplit("\n…[clipped", 1)[0])
        else:
            page = json.loads(only_text(last))
            assert page["entry_id"] == self.entry_id
            self.pages.append(page["text"])
            if page["next_offset"] is None:
                return "read it all"
            offset = page["next_offset"]
        return ToolCall(
            "results__read", {"entry_id": self.entry_id, "offset": offset, "length": MAX_PAGE_CHARS}
        )


async def session_messages(harness: Harness, session_id: str) -> list[dict[str, Any]]:
    reply = await harness.engine.trigger("session-tree::messages", {"session_id": session_id})
    return [item["message"] for item in reply["messages"]]


async def test_a_mib_result_is_clipped_for_the_model_and_read_back_whole(tmp_path: Path) -> None:
    content = big_text()
    workspace = tmp_path / "workspaces" / "big"
    workspace.mkdir(parents=True)
    (workspace / "big.txt").write_text(content)
    reader = Reader()
    model = FunctionModel(reader)
    async with Harness(
        model, home=tmp_path, tools=["fs::read", "results::read"], max_turns=40
    ) as harness:
        result = await harness.run("read big.txt", session="big")
        assert (result.ok, result.output) == (True, "read it all"), result.error
        stored = await session_messages(harness, "big")

        # What the provider received: the fs::read result clipped to the limit, every time.
        sent = [
            message
            for request in model.requests[1:]
            for message in request.messages
            if isinstance(message, FunctionResultMessage) and message.function_id == "fs::read"
        ]
        assert len(sent) == len(model.requests) - 1
        for message in sent:
            assert len(only_text(message)) <= DEFAULT_MAX_RESULT_CHARS
            assert message.details is None

        # The head and the pages results::read returned are the whole result, in order.
        [whole] = [m for m in stored if m.get("function_id") == "fs::read"]
        [block] = whole["content"]
        assert "".join(reader.pages) == block["text"]
        assert json.loads(block["text"])["content"] == content
        assert whole["details"]["content"] == content  # the session tree holds all of it
        assert len(reader.pages) == 2 + (len(block["text"]) - 1) // MAX_PAGE_CHARS


async def test_results_read_is_scoped_to_the_calling_session(tmp_path: Path) -> None:
    workspace = tmp_path / "workspaces" / "mine"
    workspace.mkdir(parents=True)
    (workspace / "big.txt").write_text("x" * 50_000)
    replies: Iterator[str | ToolCall] = iter(
        [ToolCall("fs__read", {"path": "big.txt"}), "ok", "ok"]
    )
    model = FunctionModel(lambda messages, info: next(replies))
    async with Harness(model, home=tmp_path, tools=["fs::read", "results::read"]) as harness:
        await harness.run("read", session="mine")
        await harness.run("hello", session="other")
        [entry_id] = [
            item["entry_id"]
            for item in (
                await harness.engine.trigger("session-tree::messages", {"session_id": "mine"})
            )["messages"]
            if item["message"]["role"] == "function_result"
        ]

        async def read(session_id: str, **arguments: Any) -> Any:
            call = {"session_id": session_id, "function_call_id": "c9", "run_id": "r"}
            return await harness.engine.trigger(
                "results::read", {"entry_id": entry_id, **arguments, "_call": call}
            )

        page = await read("mine", offset=49_000)
        assert (page["offset"], page["next_offset"]) == (49_000, None)
        assert page["text"] == "x" * (page["total_chars"] - 49_000 - 2) + '"}'
        with pytest.raises(InvocationError) as other:
            await read("other")
        assert other.value.remote_code == "entry_not_found"
        with pytest.raises(InvocationError) as past:
            await read("mine", offset=10**7)
        assert past.value.remote_code == "offset_out_of_range"
