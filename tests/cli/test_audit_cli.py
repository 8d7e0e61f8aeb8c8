"""`tackroom audit export|verify` and `tackroom sessions delete` in process, on an embedded engine
in a temp dir: a run is audited, its export verifies, a changed, removed or swapped line fails
with one line naming the record, and a deleted session leaves nothing in the session tree but a
``session_deleted`` record in the audit log."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tackroom.cli.audit import parse_since
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
    args = ["run", "What is 2 + 3?", "--model", "scripted:m", "--script", "turn.yaml"]
    assert main([*args, "--session", "s1"]) == 0
    return tmp_path


def exported(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    capsys.readouterr()
    assert main(["audit", "export", *args]) == 0
    return capsys.readouterr().out.splitlines()


def verify(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["audit", "verify", str(path)])
    captured = capsys.readouterr()
    return code, (captured.err or captured.out).strip()


def test_a_run_exports_and_verifies(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header, *lines = exported(capsys)
    records = [json.loads(line) for line in lines]
    kinds = [r["kind"] for r in records]
    assert {"policy_loaded", "gate_decision", "tool_call", "tool_result", "run_end"} <= set(kinds)
    assert json.loads(header)["head_seq"] == records[-1]["seq"]
    assert all(r["principal"]["id"].startswith("local:") for r in records if r["run_id"])

    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out.startswith(f"ok: {len(records)} record(s) of the audit log")

    file = workdir / "audit.jsonl"
    assert main(["audit", "export", "--out", str(file)]) == 0
    assert verify(file, capsys)[0] == 0

    session = exported(capsys, "--session", "s1", "--since", "1h")
    assert len(session) - 1 == sum(r["session_id"] == "s1" for r in records)
    (workdir / "s1.jsonl").write_text("\n".join(session) + "\n")
    assert verify(workdir / "s1.jsonl", capsys)[0] == 0


def test_verify_names_the_changed_removed_or_swapped_record(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, *lines = exported(capsys)
    file = workdir / "tampered.jsonl"

    def check(changed: list[str]) -> str:
        file.write_text("\n".join([header, *changed]) + "\n")
        code, message = verify(file, capsys)
        assert code == 1
        assert len(message.splitlines()) == 1
        return message

    edited = list(lines)
    edited[2] = edited[2].replace('"kind":"', '"kind":"x', 1)
    assert "record seq 3 (line 4) was edited" in check(edited)
    assert "seq 2 missing before record seq 3" in check([lines[0], *lines[2:]])
    swapped = [lines[0], lines[2], lines[1], *lines[3:]]
    assert "record seq 3 (line 3) stands where seq 2 belongs" in check(swapped)
    assert "removed" in check(lines[:-1])


def test_an_export_since_a_time_names_a_removed_record_and_its_range(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported(capsys)  # every fact of the run recorded
    with sqlite3.connect(workdir / ".tackroom" / "audit.db") as db:
        db.execute("UPDATE records SET ts = 0 WHERE seq <= 3")  # recorded long ago
        last = db.execute("SELECT MAX(seq) FROM records").fetchone()[0]
    header, *lines = exported(capsys, "--since", "1h")
    assert json.loads(header)["anchor"]["first_seq"] == 4
    assert [json.loads(line)["seq"] for line in lines] == list(range(4, last + 1))
    file = workdir / "since.jsonl"
    file.write_text("\n".join([header, *lines]) + "\n")
    code, message = verify(file, capsys)
    assert (code, message) == (
        0,
        f"ok: {last - 3} record(s) of {file}, seq 4..{last}, head"
        f" {json.loads(lines[-1])['hash'][:16]}",
    )
    for drop, seq in ((0, 4), (1, 5), (len(lines) - 1, last)):
        file.write_text("\n".join([header, *lines[:drop], *lines[drop + 1 :]]) + "\n")
        code, message = verify(file, capsys)
        assert code == 1
        assert len(message.splitlines()) == 1
        assert f"seq {seq}" in message
        assert "removed" in message


def test_the_live_log_names_an_edited_record(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with sqlite3.connect(workdir / ".tackroom" / "audit.db") as db:
        body = db.execute("SELECT body FROM records WHERE seq = 2").fetchone()[0]
        db.execute("UPDATE records SET body = ? WHERE seq = 2", (body.replace(":", ": ", 1),))
    capsys.readouterr()
    assert main(["audit", "verify"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "tackroom: audit: the audit log: record seq 2 (row 2) was edited: not in canonical form"
    )


def test_sessions_delete_leaves_only_the_audit_record(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["sessions", "delete", "s1"]) == 0
    assert capsys.readouterr().out.startswith("deleted s1: 4 entries")
    with sqlite3.connect(workdir / ".tackroom" / "engine.db") as db:
        left = db.execute(
            "SELECT scope, key FROM state WHERE scope IN ('sessions', 'session-entries',"
            " 'session-inbox', 'session-index') AND (key = 's1' OR key LIKE 's1/%'"
            " OR value LIKE '%\"s1\"%')"
        ).fetchall()
    assert left == []
    assert main(["sessions", "show", "s1"]) == 1
    deleted = [json.loads(line) for line in exported(capsys)[1:]]
    [record] = [r for r in deleted if r["kind"] == "session_deleted"]
    assert record["session_id"] == "s1"
    assert record["actor"].startswith("local:")
    assert record["fact"]["entries"] == 4
    assert main(["audit", "verify"]) == 0


def test_sessions_title_and_delete_with_its_forks(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["sessions", "title", "s1", "Adding  up\n two numbers"]) == 0
    assert capsys.readouterr().out.strip() == "s1: Adding up two numbers"
    assert main(["sessions", "show", "s1", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)["messages"][0]["entry_id"]
    assert main(["sessions", "fork", "s1", entry]) == 0
    fork = capsys.readouterr().out.strip()
    assert main(["sessions", "delete", "s1"]) != 0
    refused = capsys.readouterr().err.strip()
    assert len(refused.splitlines()) == 1
    assert "--cascade" in refused
    assert main(["sessions", "delete", "s1", "--cascade"]) == 0
    assert capsys.readouterr().out.startswith(f"deleted s1: 4 entries, 0 inboxes, and {fork}")
    assert main(["sessions", "show", fork]) == 1


def test_since_takes_ages_times_and_epochs() -> None:
    assert parse_since("2h", now=10_000.0) == 10_000.0 - 7200.0
    assert parse_since("1764547200") == 1764547200.0
    assert parse_since("2025-12-01T00:00:00Z") == 1764547200.0
    assert parse_since("2025-12-01T00:00:00") == 1764547200.0
