"""A 300-turn session whose history is 20 times the window: every request fits the budget, and rules
pinned at turn 1 reach the provider verbatim at turn 300 after many compactions.

The test reads what the fake OpenAI server received (through the official SDK), not tackroom's
own view of the context.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tackroom import Harness
from tackroom.contracts.context import COMPACTION_TYPE, CompactionDetails
from tackroom.contracts.messages import CustomMessage, UserMessage, text_of
from tackroom.contracts.sessions import (
    MESSAGES,
    PIN,
    MessagesRequest,
    PinRequest,
)
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.fake_llm import FakeOpenAIServer
from tests.workers.compactor.fake_model import LongSessionModel, request_text

WINDOW = 3_000
RESERVE = 500
TURNS = 300
RULE = "RULE-7: always sign off with the word 'Ahoy' and never use emoji."
FIRST = "Hello! Keep in mind: my project is called Bluefin-42 and I deploy on Fridays."


def config(server: FakeOpenAIServer) -> HarnessConfig:
    return HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "worker_config": {"openai": {"profiles": {"openai": {"base_url": server.base_url}}}},
        }
    )


@pytest.mark.timeout(300)
async def test_a_long_session_stays_in_budget_and_keeps_pinned_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-long-session")
    model = LongSessionModel(answer_chars=800)
    async with (
        FakeOpenAIServer(respond=model) as server,
        Harness(
            "openai:gpt-5-mini",
            config=config(server),
            home=tmp_path,
            context={"context_window_limit": WINDOW, "reserve_tokens": RESERVE, "keep_last": 4},
        ) as harness,
    ):
        session = "long-1"
        first = await harness.run(FIRST, session=session)
        assert first.ok, first.error
        path = await MESSAGES.call(harness.bus, MessagesRequest(session_id=session))
        first_user = next(m for m in path.messages if isinstance(m.message, UserMessage))
        await PIN.call(harness.bus, PinRequest(session_id=session, entry_id=first_user.entry_id))
        await PIN.call(harness.bus, PinRequest(session_id=session, text=RULE))
        for turn in range(2, TURNS + 1):
            result = await harness.run(
                f"Turn {turn}: tell me more about item {turn}.", session=session
            )
            assert result.ok, f"turn {turn}: {result.error}"
        path = await MESSAGES.call(harness.bus, MessagesRequest(session_id=session))
        assert not server.violations, server.violations

    total_chars = sum(len(text_of(m.message.content)) for m in path.messages)
    assert total_chars / 4 >= 20 * WINDOW, "the history must be at least 20 windows long"

    budget = WINDOW - RESERVE
    over = [(i, tokens) for i, (tokens, _) in enumerate(model.turns, 1) if tokens > budget]
    assert not over, f"requests over the budget of {budget} tokens (turn, tokens): {over[:5]}"
    assert len(model.turns) == TURNS

    last_request = request_text(model.turns[-1][1])
    assert RULE in last_request
    assert FIRST in last_request
    assert "Turn 300: tell me more about item 300." in last_request

    compactions = [m for m in path.messages if m.type == COMPACTION_TYPE]
    assert len(compactions) >= 5
    ids = {m.entry_id for m in path.messages}
    for entry in compactions:
        assert isinstance(entry.message, CustomMessage)
        details = CompactionDetails.model_validate(entry.message.details)
        assert details.replaces
        assert set(details.replaces) <= ids
        assert details.first_kept_entry_id in ids
        assert details.tokens_after < details.tokens_before
        assert first_user.entry_id not in details.replaces  # pinned: carried, never summarised
    # Each summary folds the one before it in: the chain names its predecessor.
    for before, after in itertools.pairwise(compactions):
        assert isinstance(after.message, CustomMessage)
        details = CompactionDetails.model_validate(after.message.details)
        assert details.previous_compaction_id == before.entry_id
    assert model.summaries >= len(compactions)
