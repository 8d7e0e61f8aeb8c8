"""The approval prompt of `tackroom run` reads through the event loop and can be withdrawn."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.cli import follow
from tackroom.contracts.events import EVENTS
from tackroom.harness import Harness
from tackroom.harness.terminal import TerminalView
from tackroom.testing import FunctionModel


class _PipeStdin(io.TextIOWrapper):
    def isatty(self) -> bool:  # the prompt only asks a terminal
        return True


@pytest.fixture
def stdin(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A pipe standing in for the terminal: returns the fd to type into."""
    read_fd, write_fd = os.pipe()
    with _PipeStdin(io.FileIO(read_fd, "r")) as pipe:  # closes the read end afterwards
        monkeypatch.setattr("sys.stdin", pipe)
        yield write_fd
        os.close(write_fd)


async def test_read_line_returns_what_was_typed(stdin: int) -> None:
    reading = asyncio.create_task(follow.read_line("? "))
    await asyncio.sleep(0.01)
    assert not reading.done()
    os.write(stdin, b"yes\n")
    assert await asyncio.wait_for(reading, 5) == "yes\n"


async def test_a_cancelled_read_leaves_stdin_usable(stdin: int) -> None:
    first = asyncio.create_task(follow.read_line("? "))
    await asyncio.sleep(0.01)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.create_task(follow.read_line("? "))
    os.write(stdin, b"n\n")
    assert await asyncio.wait_for(second, 5) == "n\n"


async def test_a_prompt_is_withdrawn_when_the_call_is_decided_elsewhere(
    stdin: int, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    view = TerminalView(io.StringIO(), io.StringIO(), json_lines=False)
    frame: dict[str, Any] = {"session_id": "s1", "run_id": "r1", "event_id": "r1:x"}
    request = EVENTS.parse(
        {
            **frame,
            "type": "approval_requested",
            "data": {"function_call_id": "c1", "function_id": "fs::write", "arguments": {}},
        }
    )
    resolved = EVENTS.parse(
        {
            **frame,
            "type": "approval_resolved",
            "data": {"function_call_id": "c1", "function_id": "fs::write", "decision": "allow"},
        }
    )
    harness = Harness(FunctionModel(lambda messages, info: "unused"), home=tmp_path)
    async with follow.Prompts(harness, view) as prompts:
        prompts.seen(request)
        await asyncio.sleep(0.05)
        assert "allow fs::write" in capsys.readouterr().err  # the prompt is up
        prompts.seen(resolved)
        await asyncio.sleep(0.05)
        assert prompts._open == {}  # withdrawn without anyone pressing Enter
