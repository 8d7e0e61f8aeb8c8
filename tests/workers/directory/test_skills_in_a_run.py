"""An agent run end to end: the prompt carries AGENTS.md and the skills index, and the model
fetches a skill body with the ``skills::get`` tool (``tackroom run``, scripted model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tackroom.cli.main import main
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


def test_the_model_reads_a_skill_named_in_its_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
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
    code = main(["run", "Greet me", "--model", "scripted:m", "--script", "turn.yaml", "--json"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0, events[-3:]
    [end] = [e for e in events if e["type"] == "function_execution_end"]
    assert end["data"]["is_error"] is False
    assert "Say 'Ahoy!'." in json.dumps(end["data"]["result"])
