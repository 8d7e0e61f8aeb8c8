"""The worker under test in a process of its own, in any language, for one test.

:class:`~tackroom.runtime.process.WorkerProcess` runs it (``TACKROOM_ENGINE``,
``TACKROOM_WORKER_CONFIG``, a ``ready`` line on stdout, SIGTERM at the end); a command that
cannot start, exits, or stays silent fails the test with one line naming the command and the
end of its output.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

from tackroom.runtime.process import WorkerProcess, WorkerProcessFailed

__all__ = ["WorkerProcessFailed", "external_worker"]


@asynccontextmanager
async def external_worker(
    command: Sequence[str], *, engine_url: str, config: Mapping[str, Any]
) -> AsyncIterator[WorkerProcess]:
    """Run ``command`` as the worker under test on ``engine_url`` while the block runs."""
    process = WorkerProcess(command, engine_url=engine_url, config=config)
    await process.start()
    follow = asyncio.create_task(process.follow(), name="contract-worker-output")
    try:
        yield process
        if follow.done():
            failure = follow.exception()
            how = f"stopped being read ({failure!r})" if failure else f"exited {follow.result()}"
            raise WorkerProcessFailed(process.said(f"{how} during the test"))
    finally:
        await process.stop()
        follow.cancel()
        with suppress(asyncio.CancelledError):
            await follow
