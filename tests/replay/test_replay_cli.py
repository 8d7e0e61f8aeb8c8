"""`tackroom replay` and `tackroom cassette export` on a run `tackroom run` recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tackroom.cli.main import main

SCRIPT = """
schema_version: 1
turns:
  - tool_calls: [{function_id: "calc::add", arguments: {a: 2, b: 3}, id: add-1}]
  - tool_calls: [{function_id: "fs::write", arguments: {path: sum.txt, content: "5"}, id: w-1}]
  - text: "2 + 3 = 5, saved in sum.txt"
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "turn.yaml").write_text(SCRIPT)
    run = ["run", "Add 2 and 3, save it.", "--model", "scripted:m", "--script", "turn.yaml"]
    code = main([*run, "--session", "s1", "--yes"])
    assert code == 0
    written = tmp_path / ".tackroom" / "workspaces" / "s1" / "sum.txt"
    assert written.read_text() == "5"
    written.unlink()
    return tmp_path


def test_replay_of_a_session_is_identical_and_runs_no_tool(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["replay", "s1"]) == 0
    out = capsys.readouterr().out
    assert "scripted:m, offline): 3 model call(s), 2 tool call(s) answered from" in out
    assert "identical: the replayed messages are byte for byte the recorded ones" in out
    assert not (workdir / ".tackroom" / "workspaces" / "s1" / "sum.txt").exists()


def test_an_edited_system_prompt_exits_1_naming_it(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", "s1", "--export", "incident.json"]) == 0
    recorded = json.loads((workdir / "incident.json").read_text())["system_prompt"]
    (workdir / "prompt.md").write_text(recorded.replace("Mode: agent.", "Mode: careful."))
    capsys.readouterr()
    assert main(["replay", "incident.json", "--system-prompt-file", "prompt.md"]) == 1
    out = capsys.readouterr().out
    assert "DIVERGED: model call 1: the request differs, field system_prompt" in out
    assert '  recorded: "Mode: agent.' in out
    assert '  replayed: "Mode: careful.' in out


def test_replay_json_and_cassette_export(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["cassette", "export", "s1", "-o", "c.json"]) == 0
    assert "2 tool call(s)" in capsys.readouterr().out
    run_id = json.loads((workdir / "c.json").read_text())["run_id"]
    assert main(["replay", run_id, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["identical"], report["run_id"], report["tool_calls"]) == (True, run_id, 2)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["replay", "nope"], "no run or session 'nope' on this engine"),
        (["replay", "missing.json"], "cannot read the cassette missing.json"),
        (["replay", "turn.yaml"], "turn.yaml is not a cassette"),
        (["cassette", "export", "nope", "-o", "x.json"], "no run or session 'nope'"),
        (["replay", "s1", "--system-prompt", "a", "--system-prompt-file", "b"], "not both"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    workdir: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert said in err
    assert len(err.strip().splitlines()) == 1
