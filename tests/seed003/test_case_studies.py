"""Seed 003's case studies, written with the seed's interface on a scripted agent: each fails
without the piece of tackroom that answers it.

1. Constraints given in the first turn, lost when a long session is cut to fit the window:
   ``context.pin_first_turn``.
2. The same tool called again and again with shifting arguments: the loop guard steers the
   model once, then stops the run.
3. A final answer that is not valid JSON for the schema: corrected by a model call inside the
   turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tackroom import AgentConfig, Harness, ToolCall, ToolSpec
from tackroom.contracts.context import ContextSettings
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, text_of
from tackroom.testing import FunctionModel, ModelInfo

CONSTRAINT = "CONSTRAINT: answer in French, and never name a price above 100 euros."
FILLER = "Some more detail about the trip, the dates, the people and the places. " * 9


@pytest.mark.parametrize("pin", [False, True])
async def test_first_turn_constraints_survive_six_turns_only_when_pinned(
    tmp_path: Path, pin: bool
) -> None:
    seen: list[list[AgentMessage]] = []

    def model(messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
        if info.system_prompt.startswith("You compact a conversation"):
            return "The user is planning a trip."
        seen.append(messages)
        return "ok"

    config = AgentConfig(
        context_window_limit=1_200,
        context=ContextSettings(keep_last=2, pin_first_turn=pin),
    )
    async with Harness(FunctionModel(model), home=tmp_path) as harness:
        for turn in range(1, 7):
            prompt = f"{CONSTRAINT} {FILLER}" if turn == 1 else f"Turn {turn}. {FILLER}"
            result = await harness.run(prompt, config, session="trip")
            assert result.ok, result.error
    assert len(seen) == 6
    sixth = " ".join(text_of(list(m.content)) for m in seen[-1])
    assert (CONSTRAINT in sixth) is pin


async def test_a_tool_loop_with_shifting_arguments_is_steered_then_stopped(
    tmp_path: Path,
) -> None:
    searched: list[str] = []

    def search(input: dict[str, Any]) -> list[str]:
        searched.append(input["query"])
        return []

    tool = ToolSpec(
        name="search",
        description="Search the catalogue.",
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
        handler=search,
    )
    script = [
        {"tool_calls": [{"name": "search", "arguments": {"query": f"blue shoe size {n}"}}]}
        for n in range(1, 9)
    ]
    harness = Harness("scripted:seed", script=script, home=tmp_path)
    harness.register_tool(tool)
    async with harness:
        result = await harness.run("find me a shoe", AgentConfig(tool_names=["search"]))
    assert (result.state, result.stop_reason) == ("stopped", "tool_loop")
    assert searched == ["blue shoe size 1", "blue shoe size 2", "blue shoe size 3"]
    steer = [m for m in result.messages if isinstance(m, FunctionResultMessage)][3]
    assert steer.is_error
    assert "[LOOP]" in text_of(steer.content)


class City(BaseModel):
    name: str
    population: int


async def test_an_invalid_json_answer_is_corrected_inside_the_turn(tmp_path: Path) -> None:
    script = [
        {"text": "Oslo, about 700k people."},
        {"text": '{"name": "Oslo", "population": 717710}'},
    ]
    async with Harness("scripted:seed", script=script, home=tmp_path) as harness:
        result = await harness.run("Largest city of Norway?", output_type=City)
    assert result.ok, result.error
    assert result.output == City(name="Oslo", population=717710)
    assert result.output_retries == 1
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
