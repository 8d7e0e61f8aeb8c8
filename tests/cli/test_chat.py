"""``tackroom chat`` in a pseudo-terminal, on the keyless scripted model: a conversation with an
approval decided at the prompt, Ctrl-C aborting a run (not the chat), a second Ctrl-C at the
prompt leaving; then ``--continue`` showing the history, and the slash commands."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import subprocess
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tackroom.testing.cli import tackroom_argv

PATIENCE = 30.0
"""Seconds to wait for an expected output before calling the chat stuck (not a timing check)."""

SCRIPT = [
    {"text": "hello there"},
    {
        "tool_calls": [
            {"function_id": "fs::write", "arguments": {"path": "n.txt", "content": "x"}, "id": "w1"}
        ]
    },
    {"expect": {"has_function_result_for": "w1"}, "text": "saved"},
    {"text": " ".join(["and", "on"] * 20), "delay_between_frames": 0.5},
    {"text": "a short summary"},
]


class Terminal:
    """A ``tackroom chat`` process on a pseudo-terminal it has as its controlling terminal (so
    Ctrl-C typed there is SIGINT for it, as in a real terminal)."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.fd, slave = pty.openpty()
        self.proc = subprocess.Popen(
            tackroom_argv("chat", *args),
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.seen = ""
        self._unread = ""

    def expect(self, pattern: str) -> str:
        """Read until ``pattern`` (a regex) shows; what was read up to its end."""
        deadline = time.monotonic() + PATIENCE
        while (found := re.search(pattern, self._unread)) is None:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no {pattern!r} in {self._unread!r}"
            try:
                chunk = os.read(self.fd, 4096).decode(errors="replace")
            except OSError:  # the process ended
                chunk = ""
            assert chunk, f"the chat ended before {pattern!r}: {self._unread!r}"
            self._unread += chunk.replace("\r\n", "\n")
        read, self._unread = self._unread[: found.end()], self._unread[found.end() :]
        self.seen += read
        return read

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def say(self, line: str, until: str) -> str:
        """Type ``line``; what shows until ``until`` and the next prompt."""
        self.type(line + "\n")
        shown = self.expect(until)
        return shown + self.expect(PROMPT)

    def close(self) -> int:
        try:
            return self.proc.wait(PATIENCE)
        finally:
            os.close(self.fd)


PROMPT = r"(?:^|\n)> "


@pytest.fixture
def terminals(short_tmp: Path) -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        if terminal.proc.poll() is None:
            terminal.proc.kill()
            terminal.proc.wait()


def chat(cwd: Path, terminals: list[Terminal], *args: str) -> Terminal:
    script = cwd / "chat.json"
    script.write_text(json.dumps(SCRIPT))
    terminal = Terminal(cwd, "--model", "scripted:demo", "--script", str(script), *args)
    terminals.append(terminal)
    return terminal


@pytest.mark.timeout(180)  # two chats, each booting the agent workers
def test_a_chat_approves_aborts_and_continues(short_tmp: Path, terminals: list[Terminal]) -> None:
    first = chat(short_tmp, terminals)
    session = re.search(r"session (s-\w+)", first.expect(PROMPT))
    assert session, first.seen
    assert "hello there" in first.say("hi", "hello there")

    parked = first.say("write it down", r"/approve")
    assert 'fs::write {"path": "n.txt", "content": "x"} waits for approval (call w1)' in parked
    decided = first.say("/approve", "saved")
    assert '← {"schema_version": 1, "bytes_written": 1}' in decided  # the call ran
    assert (short_tmp / ".tackroom" / "workspaces" / session[1] / "n.txt").read_text() == "x"

    first.type("go on\n")
    first.expect("and on")
    first.type("\x03")  # Ctrl-C mid-answer: the run is aborted, the chat stays
    assert "run ended: stopped (aborted)" in first.expect(r"run ended: .*\n") + first.expect(PROMPT)
    first.type("\x03")
    first.expect(r"Ctrl-C again to leave")
    first.type("\x03")
    assert first.close() == 0

    again = chat(short_tmp, terminals, "--continue")
    history = again.expect(PROMPT)
    lines = [line for line in history.splitlines() if "  [" in line]
    assert [line.split("  ", 2)[2] for line in lines[:3]] == ["hi", "hello there", "write it down"]
    assert "Aborted: aborted by the user (Ctrl-C)" in lines[-1]  # through run::abort
    greeting = lines[1].split()[0]
    assert f"pinned {greeting}" in again.say(f"/pin {greeting}", "pinned")
    assert "entries summarised" in again.say("/compact", "summarised")
    assert "no call waits" in again.say("/deny", "no call waits")
    assert "model: scripted:other from the next message on" in again.say("/model other", "model")
    assert "no command /nope" in again.say("/nope", "no command")
    forked = again.say("/fork", r"now in \S+")
    assert f"forked {session[1]} at " in forked
    again.type("/exit\n")
    assert again.close() == 0
