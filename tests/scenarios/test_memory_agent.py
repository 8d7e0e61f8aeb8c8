"""A scripted agent remembers a fact in one session with ``memory::save`` and another agent finds
it in a later session with ``memory::search``: long-term memory outlives the session and the
process (both harnesses share one home, so one ``memory.db``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tackroom import Harness, PendingApproval
from tackroom.contracts.messages import FunctionResultMessage, text_of

FACT = "The staging database listens on port 6543."
SAVE: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {
                "name": "memory__save",
                "arguments": {"text": FACT, "metadata": {"topic": "infra"}},
            }
        ]
    },
    {"text": "Noted."},
]
RECALL: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "memory__search", "arguments": {"query": "staging database port"}}]},
    {"text": "Port 6543."},
]


def harness(home: Path, script: list[dict[str, Any]], asked: list[str]) -> Harness:
    def approve(pending: PendingApproval) -> bool:
        asked.append(pending.function_id)
        return True

    return Harness(
        "scripted:demo",
        script=script,
        home=home,
        workers=["memory"],
        tools=["memory::*"],
        on_approval=approve,
    )


async def test_a_fact_saved_in_one_session_is_recalled_in_another(tmp_path: Path) -> None:
    asked: list[str] = []
    async with harness(tmp_path, SAVE, asked) as first:
        saved = await first.run("Remember where staging's database listens.", session="a")
    assert saved.ok, saved.error
    assert asked == ["memory::save"]  # writing memory asks under the default policy

    async with harness(tmp_path, RECALL, asked) as second:
        recalled = await second.run("Which port does staging's database use?", session="b")
    assert recalled.ok, recalled.error
    assert asked == ["memory::save"]  # searching it does not
    results = [m for m in recalled.messages if isinstance(m, FunctionResultMessage)]
    assert [m.function_id for m in results] == ["memory::search"]
    assert not results[0].is_error, text_of(results[0].content)
    hits = json.loads(text_of(results[0].content))["hits"]
    assert [hit["item"]["text"] for hit in hits] == [FACT]
    assert hits[0]["item"]["metadata"] == {"topic": "infra"}
    assert (tmp_path / "memory.db").is_file()
