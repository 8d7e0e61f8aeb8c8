"""`tackroom sessions pin|unpin|compact` and what `sessions show` marks, in process, on an
embedded engine in a temp dir, with the scripted model (its cursor is per session: the
runs take the first answers of turns.yaml, a compaction of the session the next)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tackroom.cli.main import main

RULE = "Always answer in French."
LONG = " ".join(["the tide comes in and the tide goes out"] * 12)
CONFIG = """schema_version: 1
agent:
  tools: []
  context: {context_window_limit: 2000, keep_last: 2}
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tackroom.yaml").write_text(CONFIG)
    answers = "".join(f"  - text: 'answer {i}: {LONG}'\n" for i in range(4))
    summary = "  - text: 'Tides, four times.'\n"
    (tmp_path / "turns.yaml").write_text(f"schema_version: 1\nturns:\n{answers}{summary}")
    return tmp_path


def show(session: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, str]]:
    assert main(["sessions", "show", session, "--json"]) == 0
    messages: list[dict[str, str]] = json.loads(capsys.readouterr().out)["messages"]
    return messages


def error_line(code: int, capsys: pytest.CaptureFixture[str]) -> str:
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tackroom: error: ")
    assert "\n" not in err
    assert "Traceback" not in err
    return err


def test_pin_a_rule_compact_and_show_what_was_replaced(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(4):
        run = ["run", f"question {i}: {LONG}", "--model", "scripted:m", "--script", "turns.yaml"]
        assert main([*run, "--session", "s1"]) == 0
    capsys.readouterr()
    first = show("s1", capsys)[0]["entry_id"]

    assert main(["sessions", "pin", "s1", first]) == 0
    assert capsys.readouterr().out.strip() == first
    assert main(["sessions", "pin", "s1", "--text", RULE]) == 0
    rule = capsys.readouterr().out.strip()

    assert main(["sessions", "compact", "s1", "--script", "turns.yaml"]) == 0
    out = capsys.readouterr().out.strip()
    compaction, _, said = out.partition(": ")
    assert compaction.startswith("compaction-")
    assert "entries summarised" in said

    entries = show("s1", capsys)
    assert entries[-1]["entry_id"] == compaction
    replaced = entries[-1]["message"]["details"]["replaces"]  # type: ignore[index]
    assert replaced
    assert first not in replaced
    assert rule not in replaced
    assert main(["sessions", "show", "s1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"{first}  [user]  (pinned)  question 0:" in lines[0]
    assert any(line.startswith(f"{rule}  [rule]  (pinned)  {RULE}") for line in lines)
    assert lines[-1].startswith(
        f"{compaction}  [compaction]  summary of {len(replaced)} entries ({replaced[0]} .."
    )
    assert lines[-1].endswith("Tides, four times.")

    assert "compaction summary" in error_line(main(["sessions", "pin", "s1", compaction]), capsys)
    assert main(["sessions", "unpin", "s1", rule, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"pinned": [first]}


def test_bad_pins_and_compactions_are_usage_errors(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "'nope'" in error_line(main(["sessions", "pin", "nope", "--text", RULE]), capsys)
    run = ["run", "hi", "--model", "scripted:m", "--script", "turns.yaml", "--session", "s2"]
    assert main(run) == 0
    capsys.readouterr()
    assert "'e-x'" in error_line(main(["sessions", "pin", "s2", "e-x"]), capsys)
    assert "or give a rule" in error_line(main(["sessions", "pin", "s2"]), capsys)
    assert "'nope'" in error_line(main(["sessions", "compact", "nope"]), capsys)
    # The session's model is scripted: without a script there is nothing to answer the summary.
    said = error_line(main(["sessions", "compact", "s2"]), capsys)
    assert said == (
        "tackroom: error: session 's2' is answered by scripted:m, which replays a script:"
        " give the summary's with --script FILE (or name another model with --model)"
    )  # this command's option, not `tackroom run`'s
    assert main(["sessions", "compact", "s2", "--script", "turns.yaml"]) == 0
    assert capsys.readouterr().out.startswith("nothing compacted: ")
