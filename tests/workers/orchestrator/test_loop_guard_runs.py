"""Seed 003's second case on a scripted model: a tool called again and again with shifting
arguments is steered once, then the run stops; a sequence under the limit runs untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom.contracts.messages import (
    AssistantMessage,
    CustomMessage,
    FunctionResultMessage,
    text_of,
)
from tackroom.harness import Harness, RunResult
from tackroom.runtime.config import HarnessConfig


def _add(n: int) -> dict[str, Any]:
    call = {"function_id": "calc::add", "arguments": {"a": n, "b": 1}, "id": f"c{n}"}
    return {"tool_calls": [call]}


def _harness(tmp_path: Path, script: list[dict[str, Any]], **orchestrator: Any) -> Harness:
    config = HarnessConfig.defaults().model_copy(
        update={"worker_config": {"orchestrator": orchestrator}} if orchestrator else {}
    )
    return Harness(
        "scripted:demo", config=config, home=tmp_path / "home", script=script, tools=["calc::*"]
    )


def _sum(result: FunctionResultMessage) -> Any:
    assert isinstance(result.details, dict), result
    return result.details["result"]


def _results(result: RunResult[Any]) -> dict[str, FunctionResultMessage]:
    return {m.function_call_id: m for m in result.messages if isinstance(m, FunctionResultMessage)}


async def test_a_query_loop_with_shifting_arguments_is_steered_once_then_stopped(
    tmp_path: Path,
) -> None:
    script = [_add(n) for n in range(1, 9)]
    script[4]["expect"] = {"has_function_result_for": "c4"}  # the 5th turn read the steering
    async with _harness(tmp_path, script) as harness:
        result = await harness.run("add until it converges", session="s1")
    assert (result.state, result.stop_reason) == ("stopped", "tool_loop")
    results = _results(result)
    assert [_sum(results[f"c{n}"]) for n in (1, 2, 3)] == [2, 3, 4]
    steer = results["c4"]
    assert steer.is_error
    assert steer.details is not None
    assert steer.details["error"] == "tool_loop"
    assert "[LOOP]" in text_of(steer.content)
    assert "calc__add 4 times in a row" in text_of(steer.content)
    assert results["c5"].details is not None
    assert results["c5"].details["stopping"] is True
    assert "c6" not in results  # no sixth model turn: the run stopped after the fifth
    [note] = [m for m in result.messages if isinstance(m, CustomMessage)]
    assert text_of(note.content).startswith("Stopped: the model called calc::add 5 times in a row")
    assert len([m for m in result.messages if isinstance(m, AssistantMessage)]) == 5


async def test_a_sequence_under_the_limit_runs_untouched(tmp_path: Path) -> None:
    script = [_add(1), _add(2), _add(3), {"text": "done"}]
    async with _harness(tmp_path, script) as harness:
        result = await harness.run("add three times", session="s1")
    assert (result.output, result.stop_reason) == ("done", "end")
    assert [_sum(m) for m in _results(result).values()] == [2, 3, 4]
    assert all(not m.is_error for m in _results(result).values())


async def test_the_limit_is_configurable_per_tool(tmp_path: Path) -> None:
    script = [*[_add(n) for n in range(1, 7)], {"text": "done"}]
    options = {"loop_guard": {"per_tool": {"calc::*": 6}}}
    async with _harness(tmp_path, script, **options) as harness:
        result = await harness.run("add six times", session="s1")
    assert (result.output, result.stop_reason) == ("done", "end")
    assert not any(m.is_error for m in _results(result).values())
