"""Holding a command until it is in its cgroup, so nothing it starts escapes the count.

At the ``bwrap`` level bwrap writes the sandbox's pid to an ``--info-fd`` pipe and waits on a
``--block-fd`` pipe before running anything: the pid is moved into the call's cgroup, then one
line on the block pipe lets it go. At the ``process`` level the spawned shell waits for a line on
its own stdin (:data:`RELEASE`), which the runner writes after :meth:`Gate.admit` (the call's
stdin follows on the same pipe).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any

from tackroom.contracts.sandbox import SANDBOX_UNAVAILABLE
from tackroom.engine.errors import FunctionError
from tackroom.workers.sandbox.cgroups import CallCgroup

__all__ = ["GO", "RELEASE", "Gate"]

RELEASE = 'read -r _ && exec "$@"'
"""``sh -c RELEASE sh COMMAND...``: wait for one line on stdin, then become the command, which
reads the rest of the pipe."""
GO = b"go\n"


class Gate:
    """One call's handshake (see the module's docstring)."""

    def __init__(self, cgroup: CallCgroup, *, bwrap: bool) -> None:
        self.cgroup = cgroup
        self.bwrap = bwrap
        self.block_r, self.block_w = os.pipe() if bwrap else (-1, -1)
        self.info_r, self.info_w = os.pipe() if bwrap else (-1, -1)
        self._open = {self.block_r, self.block_w, self.info_r, self.info_w} - {-1}

    @property
    def child_fds(self) -> tuple[int, ...]:
        return (self.block_r, self.info_w) if self.bwrap else ()

    def _close(self, fd: int) -> None:
        if fd in self._open:
            self._open.discard(fd)
            os.close(fd)

    async def admit(self, pid: int) -> None:
        """The process has started: put the sandbox in the cgroup, then let it run."""
        for fd in self.child_fds:
            self._close(fd)
        if self.bwrap:
            info = await self._read_info()
            if info is None:
                return  # bwrap ended before starting the sandbox; its stderr says why
            pid = int(info["child-pid"])
        try:
            self.cgroup.add(pid)
        except OSError as exc:
            raise FunctionError(
                SANDBOX_UNAVAILABLE, f"cannot put the command in its cgroup: {exc.strerror}"
            ) from None
        if self.bwrap:
            with contextlib.suppress(BrokenPipeError):  # it ended before it was let go
                os.write(self.block_w, GO)
            self._close(self.block_w)

    async def _read_info(self) -> dict[str, Any] | None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        self._open.discard(self.info_r)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(self.info_r, "rb", 0)
        )
        try:
            data = b""
            while chunk := await reader.read(4096):
                data += chunk
                with contextlib.suppress(ValueError):
                    found = json.loads(data)
                    return found if isinstance(found, dict) and "child-pid" in found else None
            return None
        finally:
            transport.close()

    def close(self) -> None:
        for fd in list(self._open):
            self._close(fd)
