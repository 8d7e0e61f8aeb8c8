"""A worker in a process of its own, in any language: started with the engine's URL and its
config section, ready when it says so, stopped with SIGTERM (then SIGKILL).

The one way tackroom runs a worker it does not import: an installed npm worker booted by the
host (:func:`process_worker`) and a worker under test started by ``tackroom contracts check``
(:mod:`tackroom.testing.contracts.external`). The process gets ``TACKROOM_ENGINE`` (a NATS
engine URL) and ``TACKROOM_WORKER_CONFIG`` (its config section, JSON), and says it serves by
printing a line holding the word ``ready`` on stdout after its last registration
(``tackroom worker run`` prints ``tackroom ready …``, the TypeScript SDK's examples ``ready: …``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

from pydantic import BaseModel, ConfigDict

from tackroom.runtime.worker import WorkerContext, WorkerSpec

__all__ = [
    "ENGINE_ENV",
    "READY",
    "WORKER_CONFIG_ENV",
    "WorkerProcess",
    "WorkerProcessFailed",
    "process_worker",
]

READY = re.compile(r"\bready\b", re.IGNORECASE)
ENGINE_ENV = "TACKROOM_ENGINE"
WORKER_CONFIG_ENV = "TACKROOM_WORKER_CONFIG"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0

_log = logging.getLogger("tackroom.runtime.process")


class WorkerProcessFailed(RuntimeError):
    """The worker's process could not start, exited, or did not say ``ready`` in time."""


class WorkerProcess:
    """One worker process: :meth:`start` returns once it is ready; :meth:`stop` ends it."""

    def __init__(
        self, command: Sequence[str], *, engine_url: str, config: Mapping[str, Any]
    ) -> None:
        if not command:
            raise WorkerProcessFailed("the worker command is empty")
        if not engine_url.startswith("nats://"):
            raise WorkerProcessFailed(
                f"`{' '.join(command)}` runs in a process of its own and joins the bus over"
                " NATS: set engine: nats://… (the embedded engine lives inside one process)"
            )
        self.command = list(command)
        self._env = {
            **os.environ,
            ENGINE_ENV: engine_url,
            WORKER_CONFIG_ENV: json.dumps(dict(config)),
        }
        self._process: asyncio.subprocess.Process | None = None
        self.tail: deque[str] = deque(maxlen=20)
        """The last lines it printed (stdout and stderr), for the error that names it."""

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.returncode

    async def start(self, *, timeout: float = START_TIMEOUT) -> None:
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self.command,
                env=self._env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise WorkerProcessFailed(self.said(f"cannot start: {exc.strerror or exc}")) from None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    line = await self._line()
                    if line is None:
                        code = await self._process.wait()
                        raise WorkerProcessFailed(self.said(f"exited {code} before it was ready"))
                    if READY.search(line):
                        return
        except TimeoutError:
            await self.stop()
            raise WorkerProcessFailed(
                self.said(f"said no 'ready' line within {timeout:g} s")
            ) from None

    async def follow(self) -> int:
        """Read its output (each line logged at debug) until it exits; its exit status."""
        assert self._process is not None, "start the process first"
        while (line := await self._line()) is not None:
            _log.debug("%s: %s", self.command[0], line)
        return await self._process.wait()

    async def stop(self) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()

    def said(self, what: str) -> str:
        last = " | ".join(line for line in self.tail if line)[-600:]
        shown = f"worker command `{' '.join(self.command)}` {what}"
        return shown + (f"; its last output: {last}" if last else "")

    async def _line(self) -> str | None:
        assert self._process is not None
        assert self._process.stdout is not None
        raw = await self._process.stdout.readline()
        if not raw:
            return None
        line = raw.decode("utf-8", "replace").rstrip()
        self.tail.append(line)
        return line


class ProcessWorkerConfig(BaseModel):
    """Any section: it is handed to the process as JSON, which checks it itself."""

    model_config = ConfigDict(extra="allow", frozen=True)


def process_worker(
    name: str, command: Sequence[str], *, engine_url: str, version: str = ""
) -> WorkerSpec[ProcessWorkerConfig]:
    """A worker the host runs as the process ``command`` (an installed npm worker): it is live
    once the process says ``ready``, and a process that exits stops the host (as a failed task
    does); the host's close stops the process."""

    async def start(ctx: WorkerContext[ProcessWorkerConfig]) -> None:
        process = WorkerProcess(
            command, engine_url=engine_url, config=ctx.config.model_dump(mode="json")
        )
        try:
            await process.start()
        except BaseException:
            await process.stop()
            raise

        async def supervise() -> None:
            try:
                code = await process.follow()
            finally:
                await process.stop()
            raise WorkerProcessFailed(process.said(f"exited {code}"))

        ctx.spawn(supervise(), name=f"worker-process-{name}")

    return WorkerSpec(
        name=name,
        description=f"runs `{' '.join(command)}` as a worker process",
        config_model=ProcessWorkerConfig,
        start=start,
        version=version,
    )
