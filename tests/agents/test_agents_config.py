"""Agents defined in ``tackroom.yaml`` (``agents:``) and through the facade, and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom import Harness
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, text_of
from tackroom.harness.errors import UsageError
from tackroom.harness.models import ModelChunk, ToolCall
from tackroom.runtime import load_config
from tackroom.runtime.errors import ConfigError
from tackroom.testing import FunctionModel, ModelInfo

YAML = """\
schema_version: 1
agents:
  - name: summarizer
    description: Summarize a text in one line.
    instructions: "[agent:summarizer] Summarize."
    tools: []
    output_schema:
      type: object
      properties: {summary: {type: string}}
      required: [summary]
worker_config:
  orchestrator: {policy_function: null, approvals_function: null}
"""


def respond(messages: list[AgentMessage], info: ModelInfo) -> str | list[ModelChunk]:
    if "[agent:summarizer]" in info.system_prompt:
        return '{"summary": "short"}'
    results = [m for m in messages if isinstance(m, FunctionResultMessage)]
    if not results:
        offered = [tool.name for tool in info.tools]
        assert offered == ["agent__summarizer"], offered
        return [ToolCall("agent__summarizer", {"task": "a long text"}, id="call-sum")]
    return "summary: " + text_of(results[0].content)


async def test_an_agent_from_tackroom_yaml_is_offered_and_answers_structured(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tackroom.yaml"
    path.write_text(YAML)
    config = load_config(path)
    assert [agent.name for agent in config.agents] == ["summarizer"]
    harness = Harness(FunctionModel(respond), config=config, home=tmp_path, tools=[])
    async with harness:
        result = await harness.run("summarize", session="yaml")
    assert result.ok, result.error
    assert result.output == 'summary: {"summary": "short"}'
    (call,) = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert call.details["output"] == {"summary": "short"}


def test_a_bad_agent_in_tackroom_yaml_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "tackroom.yaml"
    path.write_text("schema_version: 1\nagents:\n  - name: Bad Name\n")
    with pytest.raises(ConfigError, match=r"agents\.0\.name"):
        load_config(path)


def test_the_facade_refuses_an_agent_defined_twice_or_misnamed(tmp_path: Path) -> None:
    harness = Harness(FunctionModel(respond), home=tmp_path)
    harness.agent("helper", instructions="help")
    with pytest.raises(UsageError, match="defined already"):
        harness.agent("helper")
    with pytest.raises(UsageError, match="agent 'Not OK'"):
        harness.agent("Not OK")
