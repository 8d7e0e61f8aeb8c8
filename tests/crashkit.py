"""Crash tests' children: run ``python -m MODULE ARGS`` from the repository root, read the JSON
lines it prints, SIGKILL it once it has printed what the test waits for.

Used by the turn's crash matrix, the compaction and the subagent crash tests: each child prints
``{"marker": ...}`` (and perhaps ``{"event": ...}``) lines, flushed one by one; its stderr goes
to ``WORKDIR/<phase>.stderr`` and is attached to any failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "run_killable"]

ROOT = Path(__file__).resolve().parents[1]


async def run_killable(
    module: str,
    args: Sequence[str],
    *,
    workdir: Path,
    phase: str,
    on_line: Callable[[dict[str, Any]], None],
    kill_when: Callable[[], bool] | None,
    timeout: float,
) -> int:
    """Run the child to its end, or, with ``kill_when``, until it returns true after a line —
    then SIGKILL it (and read what it printed before it died). The child must exit 0 when it is
    not killed; it must print what ``kill_when`` waits for when it is. Returns the exit code."""
    stderr_path = workdir / f"{phase}.stderr"
    with stderr_path.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
        )
    assert process.stdout is not None
    stdout = process.stdout

    async def read(until: Callable[[], bool] | None) -> bool:
        """Lines until ``until()`` holds (True) or the output ends (False)."""
        while until is None or not until():
            line = await stdout.readline()
            if not line:
                return False
            on_line(json.loads(line))
        return True

    try:
        async with asyncio.timeout(timeout):
            if kill_when is not None:
                reached = await read(kill_when)
                assert reached, f"{phase} child exited before the kill point"
                os.kill(process.pid, signal.SIGKILL)
            await read(None)
            returncode = await process.wait()
    except BaseException as exc:
        exc.add_note(f"{phase} child stderr:\n{stderr_path.read_text()[-3000:]}")
        raise
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    expected = 0 if kill_when is None else -signal.SIGKILL
    assert returncode == expected, f"{phase} child: {stderr_path.read_text()[-3000:]}"
    return returncode
