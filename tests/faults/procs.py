"""Running ``workload.py`` children: read their JSON lines, SIGKILL them at a chosen instant."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "Child", "run_child", "spawn"]

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Child:
    """What a ``workload.py`` child printed, and how it ended."""

    process: asyncio.subprocess.Process
    stderr_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    markers: list[dict[str, Any]] = field(default_factory=list)
    booted: asyncio.Event = field(default_factory=asyncio.Event)
    killed: bool = False
    booted_at: float | None = None
    """``time.monotonic()`` when the child said it booted."""
    finished_at: float | None = None
    """... and when it last said a run finished."""
    reader: asyncio.Task[None] | None = None

    def _add(self, line: bytes) -> None:
        try:
            item = json.loads(line)
        except ValueError:
            return  # a line cut by SIGKILL
        if "event" in item:
            self.events.append(item["event"])
        else:
            self.markers.append(item)
            if item.get("marker") == "booted":
                self.booted_at = time.monotonic()
                self.booted.set()
            elif item.get("marker") == "finished":
                self.finished_at = time.monotonic()

    def finished(self) -> list[dict[str, Any]]:
        return [m for m in self.markers if m.get("marker") == "finished"]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def tracebacks(self) -> int:
        return self.stderr().count("Traceback (most recent call last)")

    def kill(self) -> None:
        if self.process.returncode is None:
            try:
                os.kill(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                return  # it exited on its own; not reaped yet
            self.killed = True

    async def wait(self, timeout: float) -> int:
        try:
            async with asyncio.timeout(timeout):
                code = await self.process.wait()
                if self.reader is not None:
                    await self.reader
        except TimeoutError as exc:
            exc.add_note(f"child stderr:\n{self.stderr()[-3000:]}")
            raise
        return code


async def _read(child: Child) -> None:
    stdout = child.process.stdout
    assert stdout is not None
    while line := await stdout.readline():
        child._add(line)


@contextlib.asynccontextmanager
async def spawn(url: str, workdir: Path, *args: str, name: str) -> AsyncIterator[Child]:
    """A running ``python -m tests.faults.workload URL WORKDIR ARGS``; killed on exit if still
    running. Its stderr goes to ``WORKDIR/<name>.stderr``."""
    stderr_path = workdir / f"{name}.stderr"
    with stderr_path.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.faults.workload",
            url,
            str(workdir),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
        )
    child = Child(process, stderr_path)
    child.reader = asyncio.create_task(_read(child))
    try:
        yield child
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await asyncio.gather(child.reader, return_exceptions=True)


async def run_child(
    url: str,
    workdir: Path,
    *args: str,
    name: str,
    kill_after: float | None = None,
    timeout: float = 60.0,
    during: Callable[[Child], Any] | None = None,
) -> Child:
    """Run a child to its end; with ``kill_after``, SIGKILL it that many seconds after it
    booted (unless it ended first). ``during(child)``, awaited once it booted, runs beside it
    (a fault injected into its surroundings). A child that exits non-zero without being killed
    fails the trial with its stderr."""
    async with spawn(url, workdir, *args, name=name) as child:
        async with asyncio.timeout(timeout):
            booted = asyncio.create_task(child.booted.wait())
            exited = asyncio.create_task(child.process.wait())
            await asyncio.wait({booted, exited}, return_when=asyncio.FIRST_COMPLETED)
            booted.cancel()
            if child.booted.is_set():
                if during is not None:
                    await during(child)
                if kill_after is not None:
                    done, _ = await asyncio.wait({exited}, timeout=kill_after)
                    if not done:
                        child.kill()
        code = await child.wait(timeout)
        if not child.killed:
            assert code == 0, f"{name} child exited {code}:\n{child.stderr()[-3000:]}"
        return child
