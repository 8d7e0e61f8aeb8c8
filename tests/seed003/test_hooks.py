"""Seed 003's lifecycle hooks: ``add_hook("before_thinking" | … , fn)`` at the turn's points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness, UsageError
from tackroom.contracts.messages import FunctionResultMessage, TextBlock, text_of
from tackroom.hooks import block, replace

CALL_THEN_ANSWER = [
    {"tool_calls": [{"name": "lookup", "arguments": {"key": "a"}}]},
    {"text": "done"},
]


def with_lookup(harness: Harness) -> list[str]:
    looked: list[str] = []

    @harness.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        looked.append(key)
        return "x" * 500

    return looked


async def test_before_thinking_blocks_the_model_call(tmp_path: Path) -> None:
    harness = Harness("scripted:seed", script=[{"text": "never sent"}], home=tmp_path)
    harness.add_hook("before_thinking", lambda request: block("no secrets to the model"))
    async with harness:
        result = await harness.run("my password is hunter2")
    assert not result.ok
    assert "no secrets to the model" in (result.error or "")


async def test_after_observing_trims_what_the_model_observes(tmp_path: Path) -> None:
    script = [
        CALL_THEN_ANSWER[0],
        {"expect": {"last_role": "function_result"}, "text": "done"},
    ]
    harness = Harness("scripted:seed", script=script, home=tmp_path)
    with_lookup(harness)

    async def trim(call: dict[str, Any]) -> Any:
        result = FunctionResultMessage.model_validate(call["result"])
        short = result.model_copy(update={"content": [TextBlock(text=text_of(result.content)[:5])]})
        return replace({**call, "result": short.model_dump(mode="json")})

    harness.add_hook("after_observing", trim)
    async with harness:
        result = await harness.run("look a up")
    (observed,) = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert text_of(observed.content) == "xxxxx"


async def test_before_acting_blocks_a_call(tmp_path: Path) -> None:
    harness = Harness("scripted:seed", script=CALL_THEN_ANSWER, home=tmp_path)
    looked = with_lookup(harness)
    harness.add_hook("before_acting", lambda call: block("read-only today"))
    async with harness:
        result = await harness.run("look a up")
    (denied,) = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert denied.is_error
    assert "read-only today" in text_of(denied.content)
    assert looked == []
    assert result.output == "done"


async def test_on_finished_sees_the_answer(tmp_path: Path) -> None:
    harness = Harness("scripted:seed", script=[{"text": "hello"}], home=tmp_path)
    finished: list[dict[str, Any]] = []
    harness.add_hook("on_finished", finished.append)
    async with harness:
        result = await harness.run("hi")
    assert result.output == "hello"
    assert [(end["run_id"], end["turn_count"]) for end in finished] == [(result.run_id, 1)]


async def test_on_finished_skips_the_turns_that_called_tools(tmp_path: Path) -> None:
    harness = Harness("scripted:seed", script=CALL_THEN_ANSWER, home=tmp_path)
    with_lookup(harness)
    finished: list[dict[str, Any]] = []
    harness.add_hook("on_finished", finished.append)
    async with harness:
        await harness.run("look a up")
    assert [end["turn_count"] for end in finished] == [2]


def test_unknown_events_and_on_error_are_refused_in_one_line(tmp_path: Path) -> None:
    harness = Harness("scripted:seed", script=[], home=tmp_path)
    with pytest.raises(UsageError, match="unknown hook 'before_thinkin': use one of") as caught:
        harness.add_hook("before_thinkin", print)
    assert "before_thinking, after_thinking" in str(caught.value)
    assert "\n" not in str(caught.value)
    with pytest.raises(UsageError, match=r"on_error.*publishes no hook"):
        harness.add_hook("on_error", print)


async def test_hooks_cost_nothing_until_one_is_added(tmp_path: Path) -> None:
    async with Harness("scripted:seed", script=[], home=tmp_path / "a") as bare:
        ids = {info.function_id for info in await bare.engine.list_functions()}
    assert not any(i.startswith(("hook-fanout::", "hook::")) for i in ids)
    hooked = Harness("scripted:seed", script=[], home=tmp_path / "b")
    hooked.add_hook("after_thinking", lambda answer: None)
    async with hooked:
        ids = {info.function_id for info in await hooked.engine.list_functions()}
    assert "hook-fanout::publish_collect" in ids
    assert "hook::harness-hooks::after_thinking" in ids
