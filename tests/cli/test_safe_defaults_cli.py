"""``tackroom run`` out of the box, on a real terminal (a pty): a write asks first, ``--mode
plan`` refuses it, ``--yes`` lets it run."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest

from tackroom.testing.cli import tackroom_argv

SCRIPT = """\
- tool_calls:
    - {function_id: fs::write, arguments: {path: a.txt, content: hi}, id: w1}
- text: finished
"""
DEADLINE = 30.0


class Terminal:
    """``tackroom ARGS`` with stdin, stdout and stderr on one pseudo-terminal."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.fd, child = pty.openpty()
        env = {**os.environ, "NO_COLOR": "1"}
        self.proc = subprocess.Popen(
            tackroom_argv(*args), cwd=cwd, stdin=child, stdout=child, stderr=child, env=env
        )
        os.close(child)
        self.seen = ""

    def read_until(self, text: str) -> str:
        deadline = time.monotonic() + DEADLINE
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never printed {text!r}; printed:\n{self.seen}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    assert text in self.seen, f"ended without {text!r}; printed:\n{self.seen}"
                self.seen += chunk.decode(errors="replace")
        return self.seen

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def finish(self) -> int:
        try:
            code = self.proc.wait(DEADLINE)
            self.read_rest()
            return code
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            os.close(self.fd)

    def read_rest(self) -> None:
        while select.select([self.fd], [], [], 0.2)[0]:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            self.seen += chunk.decode(errors="replace")


def _run(tmp_path: Path, *extra: str) -> Terminal:
    (tmp_path / "turn.yaml").write_text(SCRIPT)
    return Terminal(
        tmp_path,
        "run",
        "--model",
        "scripted:demo",
        "--script",
        "turn.yaml",
        "--tools",
        "fs::*",
        *extra,
        "write a file",
    )


def _written(tmp_path: Path) -> list[Path]:
    return list((tmp_path / ".tackroom").rglob("a.txt"))


def test_out_of_the_box_a_write_asks_and_a_no_keeps_the_disk_untouched(tmp_path: Path) -> None:
    term = _run(tmp_path)
    term.read_until('allow fs::write {"path": "a.txt", "content": "hi"}? [y/N/a=always]')
    assert not _written(tmp_path)
    term.type("n")
    assert term.finish() == 0, term.seen
    assert "finished" in term.seen
    assert not _written(tmp_path)


def test_a_yes_at_the_prompt_writes(tmp_path: Path) -> None:
    term = _run(tmp_path)
    term.read_until("allow fs::write")
    term.type("y")
    assert term.finish() == 0, term.seen
    [written] = _written(tmp_path)
    assert written.read_text() == "hi"


def test_plan_mode_refuses_the_write_without_asking(tmp_path: Path) -> None:
    term = _run(tmp_path, "--mode", "plan", "--yes")
    assert term.finish() == 0, term.seen
    assert "allow fs::write" not in term.seen
    assert "plan mode" in term.seen
    assert not _written(tmp_path)


def test_yes_runs_the_write_without_asking(tmp_path: Path) -> None:
    term = _run(tmp_path, "--yes")
    assert term.finish() == 0, term.seen
    assert "allow fs::write" not in term.seen
    [written] = _written(tmp_path)
    assert written.read_text() == "hi"


def test_a_user_without_an_account_name_is_named_by_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    import getpass

    from tackroom.cli import run

    def nameless() -> str:
        raise KeyError("getpwuid(): uid not found: 4242")

    monkeypatch.setattr(getpass, "getuser", nameless)
    assert run._principal(None, [], None).id == f"local:uid{os.getuid()}"
    assert run._principal("alice", ["ops"], None).roles == ("ops",)
