"""The facade's pins and manual compaction: a rule pinned, history summarised on request, and
what the model receives afterwards (read from the provider's received requests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom import Harness, UsageError
from tackroom.contracts.context import COMPACTION_TYPE, CompactionDetails
from tackroom.contracts.messages import CustomMessage, text_of
from tackroom.contracts.sessions import MessagesResponse
from tackroom.testing import ScriptedProvider

RULE = "Always answer in French."
SUMMARY = "The user asked four long questions about tides; all were answered."
CONTEXT = {"context_window_limit": 2000, "keep_last": 2}
"""A 2,000-token window: four runs of ~1,000 characters fit it (no compaction during a run),
and are more than the half of it a compaction keeps whole."""


def long(label: str) -> str:
    return f"{label}: " + " ".join(["the tide comes in and the tide goes out"] * 12)


def script() -> list[dict[str, str]]:
    answers = [{"text": long(f"answer {i}")} for i in range(4)]
    return [*answers, {"text": SUMMARY}, {"text": "Réponse finale."}]


async def test_a_pinned_rule_survives_a_manual_compaction_verbatim(tmp_path: Path) -> None:
    provider = ScriptedProvider(script(), name="mine")
    async with Harness(provider, home=tmp_path, context=CONTEXT) as harness:
        await harness.run(long("question 0"), session="s1")
        rule_id = await harness.sessions.pin("s1", text=RULE)
        question_id = (await _path(harness, "s1")).messages[0].entry_id
        assert await harness.sessions.pin("s1", question_id) == question_id
        for i in range(1, 4):
            await harness.run(long(f"question {i}"), session="s1")
        before = await _path(harness, "s1")

        compaction = await harness.sessions.compact("s1")

        assert compaction.compacted, compaction.detail
        assert compaction.entry_id is not None
        assert compaction.tokens_before > compaction.tokens_after > 0
        path = await _path(harness, "s1")
        entry = path.messages[-1]
        assert (entry.entry_id, entry.type) == (compaction.entry_id, "compaction")
        assert isinstance(entry.message, CustomMessage)
        assert entry.message.custom_type == COMPACTION_TYPE
        assert text_of(entry.message.content) == SUMMARY
        details = CompactionDetails.model_validate(entry.message.details)
        assert details.reason == "manual"
        assert len(details.replaces) == compaction.replaced > 0
        ids = [m.entry_id for m in before.messages]
        assert details.replaces == [i for i in ids if i in details.replaces]  # oldest first
        assert ids.index(details.first_kept_entry_id) > ids.index(details.replaces[-1])
        assert rule_id not in details.replaces
        assert question_id not in details.replaces
        assert set(path.pinned) == {rule_id, question_id}

        await harness.run("Et maintenant ?", session="s1")

    last = provider.requests[-1]
    received = [text_of(m.content) for m in last.messages]
    assert RULE in received  # verbatim, as its own message
    assert long("question 0") in received  # the pinned question, whole
    assert any(SUMMARY in text for text in received)
    replaced = details.replaces
    summarised = {text_of(m.message.content) for m in before.messages if m.entry_id in replaced}
    assert not summarised & set(received)
    summary_call = provider.requests[-2]
    assert long("answer 0") in text_of(summary_call.messages[0].content)


async def test_pins_and_compaction_say_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    provider = ScriptedProvider([{"text": "short"}], name="mine")
    async with Harness(provider, home=tmp_path) as harness:
        with pytest.raises(UsageError, match="'nope'") as unknown:
            await harness.sessions.pin("nope", text=RULE)
        assert "\n" not in str(unknown.value)
        await harness.run("hi", session="s2")
        with pytest.raises(UsageError, match="'e-missing'"):
            await harness.sessions.pin("s2", "e-missing")
        with pytest.raises(UsageError, match="or give a rule"):
            await harness.sessions.pin("s2")
        with pytest.raises(UsageError, match="blank"):
            await harness.sessions.pin("s2", text="   ")
        rule = await harness.sessions.pin("s2", text=RULE)
        assert await harness.sessions.unpin("s2", rule) == []
        assert await harness.sessions.unpin("s2", rule) == []  # unpinning twice changes nothing
        for _ in range(2):  # a rule with its own id: a retry stores and pins it once
            assert await harness.sessions.pin("s2", "rule-1", text=RULE) == "rule-1"
        ids = [m.entry_id for m in (await _path(harness, "s2")).messages]
        assert ids.count("rule-1") == 1
        assert (await _path(harness, "s2")).pinned == ["rule-1"]
        nothing = await harness.sessions.compact("s2")
        assert not nothing.compacted
        assert "nothing older to summarise" in nothing.detail
        with pytest.raises(UsageError, match="'nope'"):
            await harness.sessions.compact("nope")


def test_sessions_from_synchronous_code(tmp_path: Path) -> None:
    provider = ScriptedProvider([{"text": "short"}], name="mine")
    with Harness(provider, home=tmp_path) as harness:
        harness.run_sync("hi", session="s3")
        rule = harness.sync(harness.sessions.pin("s3", text=RULE))
        assert harness.sync(harness.sessions.unpin("s3", rule)) == []
        assert not harness.sync(harness.sessions.compact("s3")).compacted


async def _path(harness: Harness, session: str) -> MessagesResponse:
    return await harness.sessions.messages(session)
