"""`tackroom budget ...` in process, on an embedded engine in a temp dir."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tackroom.cli.main import main


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def out(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out


def reply(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_create_list_get_and_delete(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", "create", "agent/coder", "--cap", "5", "--period", "day", "--id", "b1",
                 "--alert", "0.9", "--json"]) == 0  # fmt: skip
    made = reply(capsys)
    assert (made["id"], made["scope"], made["cap_usd"], made["alert_thresholds"]) == (
        "b1", "agent/coder", 5.0, [0.9]
    )  # fmt: skip

    assert main(["budget", "create", "workspace/acme", "--cap", "100", "--track-only"]) == 0
    assert "workspace/acme" in out(capsys)

    assert main(["budget", "list"]) == 0
    lines = out(capsys).splitlines()
    assert len(lines) == 2
    assert any(line.startswith("b1 ") and "$5.0000" in line for line in lines)
    assert any("[track-only]" in line for line in lines)

    assert main(["budget", "list", "--scope", "agent/", "--json"]) == 0
    assert [b["id"] for b in reply(capsys)["budgets"]] == ["b1"]

    assert main(["budget", "update", "b1", "--cap", "7", "--json"]) == 0
    assert reply(capsys)["cap_usd"] == 7.0
    assert main(["budget", "delete", "b1"]) == 0
    assert out(capsys).strip() == "deleted"


def test_flags_usage_forecast_and_reset(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", "create", "session/s1", "--cap", "2", "--id", "b1"]) == 0
    out(capsys)
    assert main(["budget", "pause", "b1"]) == 0
    assert "[paused]" in out(capsys)
    assert main(["budget", "pause", "b1", "--off", "--json"]) == 0
    assert reply(capsys)["paused"] is False
    assert main(["budget", "enforce", "b1", "--off"]) == 0
    assert "[track-only]" in out(capsys)
    assert main(["budget", "exempt", "b1", "--hours", "1", "--json"]) == 0
    assert reply(capsys)["exempt_until"] is not None
    assert (
        main(["budget", "alerts", "b1", "--threshold", "0.5", "--function", "x::y", "--json"]) == 0
    )
    assert reply(capsys)["alert_function"] == "x::y"

    assert main(["budget", "usage", "b1"]) == 0
    text = out(capsys)
    assert "cap $2.0000 per month" in text
    assert "spent $0.0000" in text
    assert main(["budget", "forecast", "b1"]) == 0
    assert "on track" in out(capsys)
    assert main(["budget", "reset", "b1", "--json"]) == 0
    assert reply(capsys)["reset_count"] == 1


def test_errors_have_exit_codes(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", "get", "nope"]) == 1
    assert "budget_not_found" in capsys.readouterr().err
    assert main(["budget", "create", "team/x", "--cap", "1"]) == 1  # the worker validates
    assert "invalid_request" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["budget", "create", "session/s1"])  # --cap is required
    assert exited.value.code == 2
