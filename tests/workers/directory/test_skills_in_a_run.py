"""An agent run end to end: the prompt carries AGENTS.md and the skills index, and the model
fetches a skill body with the ``skills::get`` tool (``tackroom.Harness`` in the project folder,
as ``tackroom run`` boots it, scripted model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom import FunctionExecutionEnd, Harness
from tackroom.runtime.config import AgentSettings
from tackroom.testing.contracts.directory import write_skill

SCRIPT = """
schema_version: 1
turns:
  - expect:
      system_prompt_contains: "- `greeting`: How to greet a sailor."
      tools_include: ["skills::get", "calc::add"]
    tool_calls: [{function_id: "skills::get", arguments: {name: greeting}, id: sk-1}]
  - expect:
      has_function_result_for: sk-1
      system_prompt_contains: "Always answer in one word."
    text: "Ahoy!"
"""


async def test_the_model_reads_a_skill_named_in_its_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "turn.yaml").write_text(SCRIPT)
    (tmp_path / "AGENTS.md").write_text("Always answer in one word.\n")
    write_skill(
        tmp_path / ".tackroom" / "skills",
        "greeting",
        name="greeting",
        description="How to greet a sailor.",
        body="# Greeting\n\nSay 'Ahoy!'.",
    )
    harness = Harness("scripted:m", script=Path("turn.yaml"), tools=AgentSettings().tools)
    async with harness:
        stream = harness.stream("Greet me")
        events = [event async for event in stream]
    assert stream.result.ok, stream.result.error
    assert stream.result.output == "Ahoy!"
    [end] = [e for e in events if isinstance(e, FunctionExecutionEnd)]
    assert end.data.is_error is False
    assert "Say 'Ahoy!'." in end.data.result.model_dump_json()
