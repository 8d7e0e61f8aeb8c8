"""The CLI on a damaged, read-only or unsafe ``.tackroom/``: one line on stderr, never a traceback;
reading commands read without writing."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tackroom.cli.main import main
from tests.engine.files import Unwritable, damage_page, unwritable_paths

SCRIPT = """
schema_version: 1
turns:
  - text: "hello"
"""
NOBODY = 65534


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "turn.yaml").write_text(SCRIPT)
    return tmp_path


@pytest.fixture
def unwritable() -> Iterator[Unwritable]:
    with unwritable_paths() as make:
        yield make


def _run() -> int:
    return main(["run", "hi", "--model", "scripted:m", "--script", "turn.yaml", "--session", "s1"])


def _error_line(err: str) -> str:
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert line.startswith("tackroom: error: ")
    return line


def test_sessions_list_on_a_damaged_database_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run() == 0
    damaged = damage_page(workdir / ".tackroom" / "engine.db")
    capsys.readouterr()

    assert main(["sessions", "list"]) == 1

    line = _error_line(capsys.readouterr().err)
    assert "engine.db" in line
    assert "damaged" in line
    assert (workdir / ".tackroom" / "engine.db").read_bytes() == damaged


def test_sessions_list_reads_a_read_only_tackroom_dir(
    workdir: Path, capsys: pytest.CaptureFixture[str], unwritable: Unwritable
) -> None:
    assert _run() == 0
    capsys.readouterr()
    unwritable(workdir / ".tackroom")

    assert main(["sessions", "list"]) == 0

    captured = capsys.readouterr()
    assert "s1" in captured.out
    assert "Traceback" not in captured.err


def test_sessions_list_before_any_run_creates_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "list"]) == 0
    assert capsys.readouterr().out == ""
    assert not (workdir / ".tackroom").exists()


def test_a_run_makes_our_world_writable_tackroom_private(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (workdir / ".tackroom").mkdir()
    (workdir / ".tackroom").chmod(0o777)

    assert _run() == 0

    assert stat.S_IMODE((workdir / ".tackroom").stat().st_mode) & 0o022 == 0
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(".tackroom" in message for message in said)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
def test_a_run_refuses_a_world_writable_tackroom_of_another_user(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / ".tackroom").mkdir()
    os.chown(workdir / ".tackroom", NOBODY, NOBODY)
    (workdir / ".tackroom").chmod(0o777)

    assert _run() != 0

    line = _error_line(capsys.readouterr().err)
    assert ".tackroom" in line
    assert "other users" in line
    assert os.listdir(workdir / ".tackroom") == []
