"""Fixtures of the multi-process NATS tests: real child processes on a real server."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tackroom.testing.nats import NatsServer, nats_server, nats_test_url

from .child import READY

CHILD = Path(__file__).with_name("child.py")
STARTUP = 30.0


@dataclass
class Child:
    """A running ``child.py``; ``lines`` collects what it printed after ``READY``."""

    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def printed(self, prefix: str) -> list[str]:
        return [line for line in self.lines if line.startswith(prefix)]


SpawnChild = Callable[[str, str], Awaitable[Child]]


@pytest.fixture
def nats_url(tmp_path: Path) -> str:
    """A fresh namespace on the shared test server; short heartbeats so dead workers vanish."""
    return nats_test_url(tmp_path, heartbeat=0.5)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A server of this test's own, to stop and restart."""
    with nats_server(store_dir=tmp_path / "nats") as server:
        yield server


async def _pump(child: Child) -> None:
    stdout = child.process.stdout
    assert stdout is not None
    while line := (await stdout.readline()).decode():
        child.lines.append(line.strip())


@asynccontextmanager
async def _children() -> AsyncIterator[SpawnChild]:
    started: list[Child] = []

    async def spawn(mode: str, url: str) -> Child:
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(CHILD), mode, url, stdout=asyncio.subprocess.PIPE
        )
        child = Child(process)
        started.append(child)
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), STARTUP)).decode()
        assert line.startswith(READY), f"child {mode} did not start: {line!r}"
        child.reader = asyncio.create_task(_pump(child))
        return child

    try:
        yield spawn
    finally:
        for child in started:
            if child.process.returncode is None:
                child.process.terminate()
        for child in started:
            try:
                await asyncio.wait_for(child.process.wait(), 10)
            except TimeoutError:
                child.process.kill()
                await child.process.wait()
            if child.reader is not None:
                await asyncio.gather(child.reader, return_exceptions=True)


@pytest.fixture
async def spawn_child() -> AsyncIterator[SpawnChild]:
    """``await spawn_child(mode, url)``: a started ``child.py``, stopped after the test."""
    async with _children() as spawn:
        yield spawn
