"""The command line in process: the demo, usage and config errors, exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.cli.main import main


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_agent_demo_answers_with_two_tool_calls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    captured = capsys.readouterr()
    assert "1234 + 5678 = 6912." in captured.out
    assert "workspace file result.txt: 6912" in captured.out
    assert "→ calc::add" in captured.err
    assert "→ fs::write" in captured.err
    roles = [
        line.split()[1] for line in captured.out.splitlines() if "-fr-" in line or "-t" in line
    ]
    assert roles.count("function_result") == 2
    assert "SCRIPTED" in captured.out
    # the closing hint points at the providers that ship, and at storing a key
    assert "tackroom auth set openai" in captured.out
    assert "--model openai:gpt-5-mini" in captured.out
    assert "--model anthropic:" in captured.out
    assert "tackroom[openai]" in captured.out
    assert "A real model is a worker that registers" not in captured.out


def test_engine_tour_exits_zero_and_tells_the_story(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--engine-tour"]) == 0
    out = capsys.readouterr().out
    for expected in (
        "greet::hello",
        "FunctionNotFound, suggestions ['greet::hello']",
        "group ada: delivered in order [1, 2, 3]",
        "expected revision 1, found 2",
        "resumes with [2, 3]",
        "profiles/ada set",
        "shut down cleanly",
    ):
        assert expected in out


def test_a_config_error_exits_2_naming_file_and_line(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "tackroom.yaml").write_text("schema_version: 1\nworkerz: [engine]\n")
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "tackroom.yaml:2: workerz: unknown key; did you mean 'workers'?" in err


def test_an_unknown_worker_exits_2_with_suggestions(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "run", "engien", "--engine", "embedded::memory:"]) == 2
    assert "unknown worker 'engien'; did you mean engine?" in capsys.readouterr().err


def test_an_unsupported_engine_url_exits_2(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--engine", "redis://localhost"]) == 2
    assert "scheme 'redis' is not served" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["call"])
    assert caught.value.code == 2
    assert "function_id" in capsys.readouterr().err
