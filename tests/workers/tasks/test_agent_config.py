"""A task graph's agent step with an ``agent_config``: it configures the step's run; what the
step sets itself wins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom import Harness
from tackroom.contracts.messages import AgentMessage
from tackroom.contracts.tasks import Instance
from tackroom.contracts.turn import TURN_GET_STATE, TurnStateRequest
from tackroom.testing import FunctionModel
from tackroom.testing.function_model import ModelInfo
from tackroom.workers.tasks.runner import agent_ids

CONFIG: dict[str, Any] = {
    "model_backend": "function:function",
    "system_prompt": "You are a summariser.",
    "max_iterations": 3,
    "tool_names": ["calc::add"],
}


def graph(**step: Any) -> dict[str, Any]:
    agent = {"prompt": "summarise", "agent_config": CONFIG, **step}
    return {"name": "g", "steps": [{"id": "sum", "agent": agent}]}


async def max_turns_of(harness: Harness, run_id: str) -> int:
    session, _ = agent_ids(run_id, "sum", Instance(attempt=1))
    state = await TURN_GET_STATE.call(harness.bus, TurnStateRequest(session_id=session))
    assert state is not None
    return state.max_turns


async def test_an_agent_step_runs_with_its_config(tmp_path: Path) -> None:
    seen: list[tuple[str, list[str]]] = []

    def answer(messages: list[AgentMessage], info: ModelInfo) -> str:
        seen.append((info.system_prompt, [tool.name for tool in info.tools]))
        return "short"

    async with Harness(FunctionModel(answer), home=tmp_path) as harness:
        configured = await harness.tasks.run(graph(), run_id="t1", timeout=30)
        stepped = await harness.tasks.run(graph(max_turns=5, tools=[]), run_id="t2", timeout=30)
        first, second = await max_turns_of(harness, "t1"), await max_turns_of(harness, "t2")
    assert configured.status == "succeeded", configured.error
    assert stepped.status == "succeeded", stepped.error
    assert seen == [("You are a summariser.", ["calc__add"]), ("You are a summariser.", [])]
    assert (first, second) == (3, 5)


async def test_a_config_with_a_tool_timeout_runs_the_step(tmp_path: Path) -> None:
    timed = {**CONFIG, "tool_timeout_seconds": 15}
    async with Harness(FunctionModel(lambda m, i: "x"), home=tmp_path) as harness:
        run = await harness.tasks.run(
            {
                "name": "g",
                "steps": [{"id": "sum", "agent": {"prompt": "p", "agent_config": timed}}],
            },
            run_id="t3",
            timeout=30,
        )
    assert run.status == "succeeded", run.error
