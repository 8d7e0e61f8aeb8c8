"""`tackroom traces` after `tackroom run`, in process, on an embedded engine in a temp dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tackroom.cli.main import main

SCRIPT = """\
- tool_calls: [{function_id: calc::add, arguments: {a: 1, b: 2}}]
  usage: {input_tokens: 120, output_tokens: 14, cost_usd: 0.0021}
- text: The sum is 3.
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tackroom.yaml").write_text("schema_version: 1\ntracing: {exporters: [bus]}\n")
    (tmp_path / "turn.yaml").write_text(SCRIPT)
    return tmp_path


def test_list_then_the_waterfall_of_a_run_and_of_its_session(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "add 1 and 2", "--model", "scripted:m", "--script", "turn.yaml"]) == 0
    assert "The sum is 3." in capsys.readouterr().out
    assert (workdir / ".tackroom" / "traces.db").exists()

    assert main(["traces", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    (run,) = [t for t in listed["traces"] if t["run_id"]]
    assert run["root_name"] == "trigger run::start"

    assert main(["traces"]) == 0
    listing = capsys.readouterr().out
    assert f"session {run['session_id']}" in listing
    assert run["trace_id"] in listing

    assert main(["traces", run["run_id"], "--width", "100"]) == 0
    waterfall = capsys.readouterr().out
    assert waterfall.startswith(f"trace {run['trace_id']}  run {run['run_id']}")
    assert "    turn.step assistant_streaming" in waterfall
    assert "      chat m " in waterfall  # the model call under its step
    assert "      execute_tool calc__add " in waterfall
    assert "- chat m: model m, 120 in / 14 out tokens, $0.0021, finish tool_calls" in waterfall
    assert max(len(line) for line in waterfall.splitlines()[1:-2]) == 100

    assert main(["traces", run["session_id"], "--width", "100"]) == 0
    assert capsys.readouterr().out == waterfall


def test_nothing_found_is_one_line_and_exit_1(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["traces"]) == 0
    assert capsys.readouterr().out == "no traces stored\n"
    assert main(["traces", "run-nobody"]) == 1
    assert capsys.readouterr().err == "tackroom: no traces of run or session 'run-nobody'\n"
