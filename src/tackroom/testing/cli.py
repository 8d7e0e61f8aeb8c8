"""Run the ``tackroom`` command line as a real subprocess, for tests of commands end to end."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CliResult", "run_tackroom", "tackroom_argv"]


@dataclass(frozen=True, slots=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


def tackroom_argv(*args: str) -> list[str]:
    """The command line of ``tackroom ARGS`` with this interpreter (for a test that manages the
    process itself: reads it line by line, signals it)."""
    return [sys.executable, "-m", "tackroom.cli.main", *args]


async def run_tackroom(
    *args: str, cwd: Path, stdin: bytes | None = None, timeout: float = 30.0
) -> CliResult:
    """``tackroom ARGS`` in ``cwd`` with this interpreter; ``stdin`` is fed then closed."""
    proc = await asyncio.create_subprocess_exec(
        *tackroom_argv(*args),
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode is not None
    return CliResult(proc.returncode, out.decode(), err.decode())
