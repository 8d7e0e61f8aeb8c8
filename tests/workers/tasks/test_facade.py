"""Task graphs through ``Harness.tasks``: agent steps (a model run through run::start, its
answer checked against an output schema and retried when it is not), calls and files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness
from tackroom.contracts.messages import AgentMessage, text_of
from tackroom.kit.taskgraph import GraphError
from tackroom.testing import FunctionModel
from tackroom.testing.function_model import ModelInfo

from .scenario import FX_WORKER, approving

GRAPH: dict[str, Any] = {
    "name": "review",
    "inputs": {"a": 2, "b": 3},
    "steps": [
        {
            "id": "ask",
            "agent": {
                "prompt": "add ${inputs.a} and ${inputs.b}",
                "output_schema": {
                    "type": "object",
                    "properties": {"sum": {"type": "integer"}},
                    "required": ["sum"],
                },
            },
            "retry": {"attempts": 2, "on_errors": ["invalid_output"]},
        },
        {
            "id": "keep",
            "call": "fx::effect",
            "input": {"key": "${task.idempotency_key}", "value": "${steps.ask.output.sum}"},
        },
    ],
    "outputs": {"sum": "${steps.keep.output.value}"},
}


def _model() -> tuple[FunctionModel, list[str]]:
    prompts: list[str] = []

    def answer(messages: list[AgentMessage], info: ModelInfo) -> str:
        prompt = text_of(messages[-1].content)
        prompts.append(prompt)
        if len(prompts) == 1:
            return "about five, I think"  # not JSON: the step retries
        a, b = (int(word) for word in prompt.split() if word.isdigit())
        return json.dumps({"sum": a + b})

    return FunctionModel(answer), prompts


async def test_an_agent_step_feeds_a_call_step(tmp_path: Path) -> None:
    model, prompts = _model()
    async with Harness(model, home=tmp_path, workers=[FX_WORKER]) as harness:
        run = await harness.tasks.run(GRAPH, inputs={"a": 20}, run_id="h1", timeout=30)
    assert run.status == "succeeded", run.error
    assert run.outputs == {"sum": 23}
    assert prompts == ["add 20 and 3", "add 20 and 3"]
    assert run.instances["ask"].attempt == 2


async def test_a_file_is_checked_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text("steps:\n  - id: a\n    call: fx::effect\n    depends_on: [ghost]\n")
    model, _ = _model()
    harness = Harness(model, home=tmp_path / "home")
    with pytest.raises(GraphError, match=r"tasks.yaml:4: step 'a': depends on unknown step"):
        await harness.tasks.start(path)
    assert harness._bus is None  # nothing booted, nothing enqueued
    with pytest.raises(GraphError, match="unknown input"):
        await harness.tasks.start(GRAPH, inputs={"c": 1})


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tasks" / "review.yaml"


async def test_the_review_example_runs_with_a_model_and_an_approval(tmp_path: Path) -> None:

    def answer(messages: list[AgentMessage], info: ModelInfo) -> str:
        prompt = text_of(messages[-1].content)
        if prompt.startswith("Given the note"):
            return json.dumps({"publish": True, "reason": "fine"})
        return f"answer to: {prompt[:20]}"

    harness = Harness(FunctionModel(answer), home=tmp_path)
    async with harness, approving(await _started(harness)):
        run = await harness.tasks.run(EXAMPLE, inputs={"topic": "graphs"}, timeout=60)
    assert run.status == "succeeded", run.error
    assert run.outputs is not None
    assert run.outputs["draft"] == "answer to: Write a 150-word not"
    assert run.outputs["verdict"] == {"publish": True, "reason": "fine"}
    assert run.outputs["published_at"]
    assert run.steps["critique"].count == 3


async def _started(harness: Harness) -> Any:
    await harness.start()
    return harness.engine
