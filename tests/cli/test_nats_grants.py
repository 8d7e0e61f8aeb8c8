"""``tackroom nats config --grants tackroom.yaml``: the workers the embedded bus confines get the
same confinement on NATS — one table, two enforcers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.cli.main import main


def test_each_granted_worker_becomes_a_tool_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tackroom.yaml"
    config.write_text("schema_version: 1\nworker_grants:\n  weather: {tools: [weather]}\n")
    out = tmp_path / "auth.conf"
    assert main(["nats", "config", "--grants", str(config), "--out", str(out)]) == 0
    fragment = out.read_text()
    assert 'user: "weather"' in fragment
    assert '"tackroom.fn.tool=3A=3Aweather"' in fragment
    assert "approval" not in fragment
    assert "weather (tool): nats://weather:" in capsys.readouterr().out


def test_nothing_to_write_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nats", "config", "--out", str(tmp_path / "x.conf")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
