"""The context budget in the turn: the decision as an event, failures that say why, forks that
keep what a compaction summarised, and memory recalled across sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom import ContextAssembled, Harness, ToolCall
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, TextBlock, text_of
from tackroom.contracts.sessions import (
    APPEND_BATCH,
    ENSURE,
    FORK,
    MESSAGES,
    PIN,
    AppendBatchRequest,
    BatchItem,
    EnsureRequest,
    ForkRequest,
    MessagesRequest,
    PinRequest,
)
from tackroom.engine.protocol import Engine
from tackroom.harness.remote import RemoteBus
from tackroom.hooks import block
from tackroom.testing import FunctionModel, ModelInfo
from tackroom.testing.contracts.compactor import conversation

SUMMARY_START = "You compact a conversation"


def texts(messages: list[AgentMessage]) -> str:
    return "\n".join(text_of(list(m.content)) for m in messages)


class Recorder:
    """Answers turns with ``answer`` and summaries with a fixed line; keeps what each turn read."""

    def __init__(self, answer: str = "ok") -> None:
        self.answer = answer
        self.turns: list[list[AgentMessage]] = []
        self.summaries = 0

    def __call__(self, messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
        if info.system_prompt.startswith(SUMMARY_START):
            self.summaries += 1
            return "A summary of the earlier questions."
        self.turns.append(messages)
        return self.answer


async def fill(bus: Engine | RemoteBus, session: str, pairs: int) -> list[str]:
    await ENSURE.call(bus, EnsureRequest(session_id=session))
    entries = conversation(pairs)
    items = [BatchItem(entry_id=f"{session}-{i}", message=m) for i, m in entries]
    await APPEND_BATCH.call(bus, AppendBatchRequest(session_id=session, entries=items))
    return [item.entry_id or "" for item in items]


async def test_the_budget_decision_is_an_event(tmp_path: Path) -> None:
    model = Recorder()
    async with Harness(
        FunctionModel(model), home=tmp_path, context={"context_window_limit": 2_000}
    ) as harness:
        run = harness.stream("hello")
        events = [event async for event in run]
    [decision] = [e.data for e in events if isinstance(e, ContextAssembled)]
    assert decision.window_tokens == 2_000
    assert decision.reserve_tokens == 500  # a quarter of the window at most
    assert decision.budget_tokens == 1_500
    assert 0 < decision.estimated_tokens <= decision.budget_tokens
    assert decision.entries_sent == 1
    assert not decision.compacted
    assert decision.message_id == f"{run.run_id}-t1-a"


async def test_no_budget_without_a_window(tmp_path: Path) -> None:
    async with Harness(FunctionModel(Recorder()), home=tmp_path) as harness:
        events = [event async for event in harness.stream("hello")]
    assert not [e for e in events if isinstance(e, ContextAssembled)]


async def test_a_history_that_cannot_fit_says_why(tmp_path: Path) -> None:
    model = Recorder()
    context = {"context_window_limit": 1_000, "compact": False}
    async with Harness(FunctionModel(model), home=tmp_path, context=context) as harness:
        await fill(harness.bus, "full", 20)
        result = await harness.run("one more", session="full")
    assert not result.ok
    assert model.turns == []
    assert result.error is not None
    assert "context_overflow" in result.error or "budget" in result.error
    assert "compaction is off" in result.error


async def test_pinned_entries_over_the_budget_say_so(tmp_path: Path) -> None:
    context = {"context_window_limit": 1_000}
    async with Harness(FunctionModel(Recorder()), home=tmp_path, context=context) as harness:
        await fill(harness.bus, "pinned", 20)
        await PIN.call(harness.bus, PinRequest(session_id="pinned", text="rule " * 2_000))
        result = await harness.run("one more", session="pinned")
    assert result.error is not None
    assert "pinned entries alone" in result.error


async def test_a_fork_from_before_a_compaction_reads_the_originals(tmp_path: Path) -> None:
    model = Recorder()
    context = {"context_window_limit": 3_000, "keep_last": 2}
    async with Harness(FunctionModel(model), home=tmp_path, context=context) as harness:
        ids = await fill(harness.bus, "source", 20)
        result = await harness.run("go on", session="source")
        assert result.ok, result.error
        source = await MESSAGES.call(harness.bus, MessagesRequest(session_id="source"))
        assert [m.type for m in source.messages].count("compaction") == 1
        compacted = texts(model.turns[-1])
        assert "A summary of the earlier questions." in compacted
        assert "Question 0:" not in compacted
        await FORK.call(
            harness.bus,
            ForkRequest(source_session_id="source", from_entry_id=ids[-1], session_id="fork"),
        )
        path = await MESSAGES.call(harness.bus, MessagesRequest(session_id="fork"))
        assert [m.entry_id for m in path.messages] == ids
        assert all(m.type != "compaction" for m in path.messages)


async def test_a_fact_saved_in_one_session_is_recalled_in_another(tmp_path: Path) -> None:
    fact = "The user's dog is called Pixel and is a border collie."

    def remember(messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
        if isinstance(messages[-1], FunctionResultMessage):
            return "Saved."
        return ToolCall("memory__save", {"text": fact})

    seen: list[str] = []

    def answer(messages: list[AgentMessage], info: ModelInfo) -> str:
        seen.append(texts(messages))
        return "Your dog is Pixel." if "Pixel" in seen[-1] else "I do not know."

    recall: dict[str, Any] = {"recall": {"top_k": 3}}
    async with Harness(
        FunctionModel(remember),
        home=tmp_path,
        workers=["memory"],
        tools=["memory::save"],
        auto_approve=True,
    ) as harness:
        saved = await harness.run("Remember: my dog Pixel is a border collie.", session="one")
        assert saved.ok, saved.error
    async with Harness(
        FunctionModel(answer), home=tmp_path, workers=["memory"], context=recall
    ) as harness:
        result = await harness.run("What is my dog called?", session="two")
        path = await MESSAGES.call(harness.bus, MessagesRequest(session_id="two"))
    assert result.output == "Your dog is Pixel."
    assert fact in seen[0]
    [note] = [m for m in path.messages if m.type == "custom"]
    assert note.message.role == "custom"
    assert note.message.custom_type == "memory_recall"
    assert isinstance(note.message.content[0], TextBlock)
    assert fact in note.message.content[0].text


async def test_summaries_pass_the_model_call_hooks(tmp_path: Path) -> None:
    async def no_summaries(call: dict[str, Any]) -> Any:
        if str(call.get("system_prompt", "")).startswith(SUMMARY_START):
            return block("summaries are not allowed here")
        return None

    model = Recorder()
    context = {"context_window_limit": 3_000, "keep_last": 2}
    harness = Harness(FunctionModel(model), home=tmp_path, context=context)
    harness.add_hook("before_model_call", no_summaries)
    async with harness:
        await fill(harness.bus, "guarded", 20)
        result = await harness.run("go on", session="guarded")
    assert model.summaries == 0
    assert model.turns == []
    assert result.error is not None
    assert "summaries are not allowed here" in result.error
