"""`tackroom run` and `tackroom sessions` in process, on an embedded engine in a temp dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tackroom.cli.main import main

SCRIPT = """
schema_version: 1
turns:
  - tool_calls: [{function_id: "calc::add", arguments: {a: 2, b: 3}, id: add-1}]
  - expect: {has_function_result_for: add-1}
    text: "2 + 3 = 5"
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "turn.yaml").write_text(SCRIPT)
    return tmp_path


def run(*extra: str) -> int:
    return main(["run", "What is 2 + 3?", "--model", "scripted:m", "--script", "turn.yaml", *extra])


def test_run_streams_the_answer_and_shows_the_tool(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("--session", "s1") == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "2 + 3 = 5"
    assert '→ calc::add {"a": 2, "b": 3}' in captured.err


def test_run_json_prints_a_gap_free_event_stream(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("--json") == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    events = [e for e in lines if not e.get("live")]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    live = [e for e in lines if e.get("live")]
    assert live  # the answer's deltas, never stored: no seq of their own
    assert {e["type"] for e in live} <= {"message_update", "message_snapshot"}
    assert all("seq" not in e for e in live)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "agent_end"
    assert kinds.count("function_execution_start") == kinds.count("function_execution_end") == 1
    assert len({e["event_id"] for e in events}) == len(events)


def test_run_without_a_model_is_a_usage_error(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "hi"]) == 2
    assert "PROVIDER:MODEL" in capsys.readouterr().err


def test_sessions_list_show_and_fork(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--session", "s1") == 0
    capsys.readouterr()

    assert main(["sessions", "list"]) == 0
    assert "s1" in capsys.readouterr().out

    assert main(["sessions", "show", "s1", "--json"]) == 0
    entries = [item["entry_id"] for item in json.loads(capsys.readouterr().out)["messages"]]
    assert len(entries) == 4  # user, tool call, tool result, answer

    assert main(["sessions", "fork", "s1", entries[1]]) == 0
    fork = capsys.readouterr().out.strip()
    assert main(["sessions", "show", fork, "--json"]) == 0
    forked = [item["entry_id"] for item in json.loads(capsys.readouterr().out)["messages"]]
    assert forked == entries[:2]
