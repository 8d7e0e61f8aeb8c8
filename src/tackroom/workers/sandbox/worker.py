"""The ``sandbox`` worker: ``sandbox::run`` and ``sandbox::status`` (docs/workers/sandbox.md).

```yaml
worker_config:
  sandbox:
    workspace_root: .tackroom/workspaces   # the files worker's: <root>/<session_id>/
    level: bwrap                           # or process: opt-in, NOT isolated (host files, network)
    network: false
    memory_mb: 1024                        # address space of each process
    cpu_seconds: 60                        # CPU time of each process
    max_processes: 128                     # processes of one call at once
    max_file_bytes: 67108864
    max_open_files: 256
    max_output_bytes: 65536                # kept of stdout, and of stderr
    tmp_mb: 256                            # each call's /tmp and /dev/shm
    default_timeout: 30
```

Replaceable by id: another worker serving ``sandbox::run`` and ``sandbox::status`` (a container
runtime, a remote machine) serves the ``shell`` tools unchanged; it proves it fits with
``tackroom.testing.contracts.SandboxContract``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tackroom.contracts.sandbox import (
    SANDBOX_RUN,
    SANDBOX_STATUS,
    RunRequest,
    RunResult,
    StatusRequest,
    StatusResponse,
)
from tackroom.kit.forgetting import forget_deleted_sessions
from tackroom.kit.workspace import remove_session_dir
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.sandbox.config import SandboxConfig

if TYPE_CHECKING:
    from tackroom.workers.sandbox.sandbox import Sandbox

__all__ = ["WORKER", "SandboxConfig"]


class _OnFirstCall:
    """The worker's :class:`Sandbox`, made by the first call: a run that never calls the sandbox
    pays neither for its modules nor for finding and probing the host (``Sandbox.ready``)."""

    def __init__(self, config: SandboxConfig) -> None:
        self._config = config
        self._sandbox: Sandbox | None = None

    def get(self) -> Sandbox:
        if self._sandbox is None:
            from tackroom.workers.sandbox.sandbox import Sandbox

            self._sandbox = Sandbox(self._config)
        return self._sandbox


async def _start(ctx: WorkerContext[SandboxConfig]) -> None:
    sandbox = _OnFirstCall(ctx.config)

    async def run(request: RunRequest) -> RunResult:
        return await sandbox.get().run(request)

    async def status(request: StatusRequest) -> StatusResponse:
        ready = sandbox.get()
        await ready.ready()  # the true level and availability: probing if no call has yet
        return ready.status()

    await ctx.serve(SANDBOX_RUN, run)
    await ctx.serve(SANDBOX_STATUS, status)

    async def forget(session_id: str) -> dict[str, int]:
        root = ctx.config.workspace_root
        return {"workspace_entries": await asyncio.to_thread(remove_session_dir, root, session_id)}

    await forget_deleted_sessions(ctx, forget)


WORKER = WorkerSpec(
    name="sandbox",
    description="Run commands isolated by bubblewrap in a session's workspace, within limits.",
    config_model=SandboxConfig,
    start=_start,
)
