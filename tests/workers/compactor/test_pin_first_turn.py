"""Seed 003's first case: constraints a user gives in the first turn, lost when a long session's
history is cut to fit — kept by ``pin_first_turn``. Six turns in one session on a small window:
the sixth model call still reads the first turn, word for word, only with the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom import Harness, ToolCall
from tackroom.contracts.context import ContextSettings
from tackroom.contracts.messages import AgentMessage, UserMessage, text_of
from tackroom.contracts.sessions import MESSAGES, MessagesRequest
from tackroom.kit.compacting import manual_request
from tackroom.kit.context import compaction_details
from tackroom.testing import FunctionModel, ModelInfo

CONSTRAINT = "CONSTRAINT: answer in French, and never name a price above 100 euros."
SUMMARY_START = "You compact a conversation"
FILLER = "Some more detail about the trip, the dates, the people and the places. " * 9


class Recorder:
    """Answers each turn ``ok`` and each summary with a line that keeps no constraint."""

    def __init__(self) -> None:
        self.turns: list[list[AgentMessage]] = []

    def __call__(self, messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
        if info.system_prompt.startswith(SUMMARY_START):
            return "The user is planning a trip."
        self.turns.append(messages)
        return "ok"


def _reads_constraint(messages: list[AgentMessage]) -> bool:
    return any(CONSTRAINT in text_of(list(m.content)) for m in messages)


@pytest.mark.parametrize("pin", [False, True])
async def test_the_sixth_turn_reads_the_first_turn_only_when_pinned(
    tmp_path: Path, pin: bool
) -> None:
    model = Recorder()
    context = {"context_window_limit": 1_200, "keep_last": 2, "pin_first_turn": pin}
    async with Harness(FunctionModel(model), home=tmp_path, context=context) as harness:
        first = await harness.run(f"{CONSTRAINT} {FILLER}", session="trip")
        assert first.ok, first.error
        for turn in range(2, 7):
            result = await harness.run(f"Turn {turn}. {FILLER}", session="trip")
            assert result.ok, result.error
        path = await MESSAGES.call(harness.bus, MessagesRequest(session_id="trip"))
    assert len(model.turns) == 6
    assert _reads_constraint(model.turns[0])
    compactions = [m for m in path.messages if m.type == "compaction"]
    assert compactions, "the history never had to be cut: the case is not exercised"
    first_entry = path.messages[0].entry_id
    details = [compaction_details(m.message) for m in compactions]
    replaced = {entry for d in details if d is not None for entry in d.replaces}
    assert _reads_constraint(model.turns[-1]) is pin
    assert (first_entry in replaced) is not pin  # a pinned first turn is never summarised
    if pin:  # carried whole, before the summary, as the user wrote it
        carried = model.turns[-1][0]
        assert isinstance(carried, UserMessage)
        assert text_of(list(carried.content)).startswith(CONSTRAINT)


async def test_a_manual_compaction_spares_the_first_turn_too(tmp_path: Path) -> None:
    model = Recorder()
    async with Harness(FunctionModel(model), home=tmp_path) as harness:
        for turn in range(1, 4):
            await harness.run(f"{CONSTRAINT if turn == 1 else turn} {FILLER}", session="s")
        path = await MESSAGES.call(harness.bus, MessagesRequest(session_id="s"))
        settings = ContextSettings(pin_first_turn=True)
        request = await manual_request(
            harness.bus, session_id="s", provider="function", model="function",
            settings=settings, path=path,
        )  # fmt: skip
        plain = await manual_request(
            harness.bus, session_id="s", provider="function", model="function",
            settings=ContextSettings(), path=path,
        )  # fmt: skip
    assert request.pinned == [path.messages[0].entry_id]
    assert plain.pinned == []
    assert "pinned" not in plain.model_dump(mode="json")  # an older compactor reads it as before
