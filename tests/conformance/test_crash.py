"""Durability: a process killed with SIGKILL loses no state, stream record or queued message.

The child (``crash_child.py``) is a real process opened on the same engine URL, so the test runs
unchanged on every backend.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tackroom.engine import EngineLocked
from tackroom.testing import RecordingHandler, running_engine

from .crash_child import CRASH_QUEUE, FUNCTION, MARKER, QUEUE

CHILD = Path(__file__).with_name("crash_child.py")


@dataclass(frozen=True)
class HeldMessage:
    process: asyncio.subprocess.Process
    message_id: str
    attempt: int


@asynccontextmanager
async def _child_holding_a_message(url: str) -> AsyncIterator[HeldMessage]:
    """Run the child until its handler holds the queued message; kill it on the way out."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), url, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        message_id, attempt = await asyncio.wait_for(_read_marker(process.stdout), 30)
        yield HeldMessage(process, message_id, attempt)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def _read_marker(stdout: asyncio.StreamReader) -> tuple[str, int]:
    while line := (await stdout.readline()).decode():
        if line.startswith(MARKER + " "):
            _, message_id, attempt = line.split()
            return message_id, int(attempt)
    raise AssertionError("the child exited before its handler got the message")


async def test_sigkill_loses_no_state_stream_record_or_message(engine_url: str) -> None:
    async with _child_holding_a_message(engine_url) as held:
        assert held.attempt == 1
        os.kill(held.process.pid, signal.SIGKILL)
        assert await asyncio.wait_for(held.process.wait(), 10) == -signal.SIGKILL

    async with running_engine(engine_url) as engine:
        await engine.configure_queue(QUEUE, CRASH_QUEUE)
        handler = RecordingHandler()
        await engine.register_function(FUNCTION, handler)

        [call] = await handler.wait_for_calls(1, timeout=20)
        assert call.message_id == held.message_id
        assert call.attempt == 2
        assert call.payload == {"job": 1}

        entry = await engine.get_state("crash", "k")
        assert entry is not None
        assert entry.value == {"v": 2}
        assert entry.revision >= 2
        records = await engine.read("crash", "g")
        assert [(r.seq, r.data) for r in records] == [(i + 1, {"i": i}) for i in range(3)]
        assert await engine.append("crash", "g", {"i": 3}) == 4


async def test_embedded_database_is_locked_by_its_owner_process(
    engine_url: str, backend: str
) -> None:
    if backend != "embedded":
        pytest.skip("only the embedded backend owns a file")
    async with _child_holding_a_message(engine_url):
        with pytest.raises(EngineLocked):
            async with running_engine(engine_url):
                pass
