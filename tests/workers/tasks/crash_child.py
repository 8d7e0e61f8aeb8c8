"""A harness process running the scenario graph, which SIGKILLs itself at its N-th engine write.

``python -m tests.workers.tasks.crash_child URL --kill-at N [--mode before|after]``: boots the
scenario's workers on ``URL``, starts (or finds) the run, approves what waits, and prints JSON
lines: ``{"marker": "booted"}``, then ``{"marker": "finished", "status", "writes"}`` — unless
write ``N`` (every worker's, from the start) comes first: then the process kills
itself with SIGKILL, just before that write or just after it (``--mode``); ``--only PREFIX``
counts only the writes whose label starts with it (``set_state task-runs/``: the commits).
``--kill-at 0`` never kills (the resume).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tackroom.engine import open_engine
from tackroom.testing.faults import FaultyEngine

from .scenario import approving, finished, host_for, start

T = TypeVar("T")


class KillingEngine(FaultyEngine):
    """Counts writes once armed (those whose label starts with ``only``) and dies with SIGKILL
    at the ``fail_at``-th."""

    only = ""

    async def _write(self, label: str, write: Callable[[], Awaitable[T]]) -> T:
        if not self.armed or not label.startswith(self.only):
            return await write()
        self.writes.append(label)
        if len(self.writes) == self.fail_at:
            if self.mode == "after":
                await write()
            os.kill(os.getpid(), signal.SIGKILL)
        return await write()


def _say(**item: object) -> None:
    print(json.dumps(item), flush=True)


async def main(url: str, kill_at: int, mode: str, only: str) -> None:
    engine = KillingEngine(open_engine(url))
    engine.only = only
    engine.arm(fail_at=kill_at or None, mode="after" if mode == "after" else "before")
    async with host_for(engine) as host:
        _say(marker="booted")
        bus = host.engine
        async with approving(bus):
            await start(bus)
            run = await finished(bus, timeout=60)
        _say(marker="finished", status=run.status, writes=len(engine.writes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--kill-at", type=int, default=0)
    parser.add_argument("--mode", choices=["before", "after"], default="before")
    parser.add_argument("--only", default="", help="count only writes whose label starts so")
    args = parser.parse_args()
    asyncio.run(main(args.url, args.kill_at, args.mode, args.only))
