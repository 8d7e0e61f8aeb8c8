"""Running one process to its end: stdin fed, output kept up to a cap, a timeout, nothing left.

The process starts in a session (and process group) of its own. Output is read as it comes and
only the first ``max_output`` bytes of each stream are kept (the rest is read and counted, so the
process never blocks on a full pipe, and memory stays bounded). At the timeout the whole group is
killed (``SIGKILL``), and after the process ends — on time or not — whatever is left of its group
is killed too, and ``kill_rest`` is called for what escaped the group (a cgroup's processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Execution", "execute"]

_CHUNK = 65536
_DRAIN_GRACE = 2.0
"""How long output is still read after the process and its group are gone (a process outside
the group may hold the pipe; at the ``bwrap`` level none can)."""


@dataclass(frozen=True, slots=True)
class Execution:
    returncode: int
    """As :mod:`subprocess` reports it: negative when a signal ended the process."""
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    duration: float


class _Capture:
    """The first ``cap`` bytes of a stream, and whether there was more."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.more = False

    async def drain(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(_CHUNK):
            room = self.cap - len(self.data)
            if len(chunk) > room:
                self.more = True
            if room > 0:
                self.data += chunk[:room]


async def _feed(stream: asyncio.StreamWriter | None, data: bytes) -> None:
    if stream is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stream.write(data)
        await stream.drain()
    stream.close()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await stream.wait_closed()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def execute(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: bytes | None,
    timeout: float,
    max_output: int,
    pass_fds: Sequence[int] = (),
    started: Callable[[int], Awaitable[None]] | None = None,
    kill_rest: Callable[[], None] | None = None,
) -> Execution:
    """Run ``argv`` to its end or its timeout. ``started(pid)`` runs first, inside the timeout
    and before any of ``stdin`` is written (to put the process in a cgroup, say); if it raises,
    the process is killed."""
    began = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    out, err = _Capture(max_output), _Capture(max_output)
    tasks = [
        asyncio.create_task(out.drain(process.stdout)),
        asyncio.create_task(err.drain(process.stderr)),
    ]
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                if started is not None:
                    await started(process.pid)
                if stdin is not None:
                    tasks.append(asyncio.create_task(_feed(process.stdin, stdin)))
                await process.wait()
        except TimeoutError:
            timed_out = True
        finally:
            _kill_group(process.pid)
            if kill_rest is not None:
                kill_rest()
        returncode = await process.wait()
        duration = time.monotonic() - began
        await asyncio.wait(tasks, timeout=_DRAIN_GRACE)
    finally:
        _kill_group(process.pid)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return Execution(
        returncode=returncode,
        stdout=bytes(out.data),
        stderr=bytes(err.data),
        stdout_truncated=out.more,
        stderr_truncated=err.more,
        timed_out=timed_out,
        duration=duration,
    )
