"""``AgentConfig``: its fields, YAML both ways, and what it makes of a run request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tackroom
from tackroom import AgentConfig, Harness, HarnessConfig, UsageError
from tackroom.contracts import agentconfig as contract
from tackroom.contracts.context import ContextSettings, RecallSettings
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.turn import ModelRef, RunStartRequest
from tackroom.harness.agentconfig import as_agent_config, configured
from tackroom.testing import FunctionModel, ModelInfo

SEED_YAML = """\
model_backend: openai:gpt-5-mini -> anthropic:claude-haiku-4-5
system_prompt: You are a weather bot.
max_iterations: 4
tool_timeout_seconds: 15
context_window_limit: 12000
tool_names: [get_weather, fs::read, "calc::*"]
"""


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    assert "Traceback" not in text
    return text


def test_the_seeds_names_are_exported_from_tackroom() -> None:
    assert tackroom.AgentResult is tackroom.RunResult
    assert issubclass(tackroom.AgentConfig, contract.AgentConfig)
    assert tackroom.HarnessConfig is HarnessConfig
    assert AgentConfig().max_iterations == 8


def test_yaml_round_trips() -> None:
    config = AgentConfig.from_yaml(SEED_YAML)
    assert config.tool_timeout_seconds == 15
    again = AgentConfig.from_yaml(config.to_yaml())
    assert again == config
    assert again.to_yaml() == config.to_yaml()
    assert config.to_yaml().startswith("schema_version: 1\nmodel_backend:")
    assert AgentConfig.from_yaml("") == AgentConfig()


def test_a_tackroom_yaml_agent_section_is_read(tmp_path: Path) -> None:
    path = tmp_path / "tackroom.yaml"
    path.write_text(
        "schema_version: 1\n"
        "agent:\n"
        "  model: scripted:demo\n"
        "  max_turns: 3\n"
        "  mode: ask\n"
        "  tools: [fs::read]\n"
        "  context: {context_window_limit: 9000}\n"
    )
    config = AgentConfig.load(path)
    assert (config.model_backend, config.max_iterations, config.mode) == ("scripted:demo", 3, "ask")
    assert config.tool_names == ["fs::read"]
    assert config.context == ContextSettings(context_window_limit=9000)
    assert AgentConfig.from_yaml("agent: {model: a:b}\n").tool_names is None  # tools not set


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("model_backend: gpt-5\n", "model_backend: Value error, name a model as PROVIDER:MODEL"),
        ("max_iterations: 0\n", "max_iterations: Input should be greater than or equal to 1"),
        ("max_iteration: 3\n", "max_iteration: Extra inputs are not permitted"),
        ("tool_names: [' ']\n", "tool_names: Value error, tool name ' ' must be"),
        ("- a\n", "expected a mapping of its fields, got list"),
        ("a: [\n", "invalid YAML"),
        (
            "context_window_limit: 9000\ncontext: {context_window_limit: 8000}\n",
            "context_window_limit is 9000 but context.context_window_limit is 8000: give it once",
        ),
        ("agent: {max_turns: 0}\n", "agent section: max_turns: Input should be greater"),
    ],
)
def test_a_bad_config_is_one_readable_line(text: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        AgentConfig.from_yaml(text)
    assert said in one_line(caught)


def test_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"agent config .*nope.yaml: No such file") as caught:
        AgentConfig.load(tmp_path / "nope.yaml")
    one_line(caught)


def _request(**changes: Any) -> RunStartRequest:
    fields: dict[str, Any] = {
        "session_id": "s",
        "run_id": "r",
        "provider": "scripted",
        "model": "demo",
        "messages": [UserMessage.text("hi")],
        "max_turns": 20,
        "tools": ["tool::a", "fs::*"],
        "context": ContextSettings(keep_last=7),
    }
    return RunStartRequest(**{**fields, **changes})


def test_run_fields_map_each_field_onto_run_start() -> None:
    config = AgentConfig.from_yaml(SEED_YAML + "mode: plan\ntask: code\ninstructions: Be brief.\n")
    fields = config.run_fields(context=ContextSettings(keep_last=7))
    assert fields == {
        "max_turns": 4,
        "provider": "openai",
        "model": "gpt-5-mini",
        "fallbacks": [ModelRef(provider="anthropic", model="claude-haiku-4-5")],
        "tools": ["tool::get_weather", "fs::read", "calc::*"],
        "context": ContextSettings(keep_last=7, context_window_limit=12000),
        "system_prompt": "You are a weather bot.",
        "instructions": "Be brief.",
        "mode": "plan",
        "task": "code",
        "tool_timeout": 15.0,
    }
    assert AgentConfig().run_fields() == {"max_turns": 8}


def test_configured_fills_the_request_and_keeps_what_the_config_leaves_out() -> None:
    config = AgentConfig(max_iterations=2, tool_names=["a"], context_window_limit=5000)
    request = configured(_request(), config, registered={"a"}, context=None)
    assert (request.max_turns, request.tools) == (2, ["tool::a"])
    assert (request.provider, request.model) == ("scripted", "demo")
    assert request.context == ContextSettings(keep_last=7, context_window_limit=5000)
    recall = ContextSettings(recall=RecallSettings(top_k=2))
    kept = configured(_request(), AgentConfig(context=recall), registered=(), context=None)
    assert kept.context == recall
    unchanged = configured(_request(), AgentConfig(), registered=(), context=None)
    assert unchanged.context == ContextSettings(keep_last=7)


def test_an_unregistered_bare_tool_name_is_refused() -> None:
    with pytest.raises(UsageError, match="no tool named 'b' is registered \\(registered: a\\)"):
        configured(_request(), AgentConfig(tool_names=["b"]), registered={"a"}, context=None)


def test_run_takes_a_config_a_mapping_or_nothing() -> None:
    assert as_agent_config(None) is None
    assert as_agent_config({"max_iterations": 3}) == AgentConfig(max_iterations=3)
    plain = contract.AgentConfig(max_iterations=3, tool_names=["a"])
    assert as_agent_config(plain) == AgentConfig(max_iterations=3, tool_names=["a"])
    with pytest.raises(UsageError, match="a HarnessConfig goes to Harness\\(config=\\)"):
        as_agent_config(HarnessConfig.defaults())


async def test_what_run_says_wins_over_the_config(tmp_path: Path) -> None:
    prompts: list[str] = []

    def answer(messages: list[Any], info: ModelInfo) -> str:
        prompts.append(info.system_prompt)
        return "ok"

    harness = Harness(FunctionModel(answer), home=tmp_path, instructions="Harness rule.")
    config = AgentConfig(max_iterations=2, instructions="Config rule.", task="code")
    async with harness:
        own = await harness.run("a", config, max_turns=5, instructions="Run rule.")
        configured_only = await harness.run("b", config)
        states = [await harness.get_state(r.session_id) for r in (own, configured_only)]
    assert [state.max_turns for state in states if state] == [5, 2]
    assert prompts[0].endswith("Config rule.\n\nRun rule.")
    assert "Harness rule." not in prompts[0]
    assert prompts[1].endswith("Config rule.")
