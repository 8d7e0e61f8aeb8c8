"""How the bridge reaches one server: the SDK's stdio or streamable HTTP transport, watched.

- :func:`watched` wraps a transport so the bridge learns the moment the server's side of the
  connection ends (a stdio server's stdout closes when it dies), without polling.
- :class:`StderrPump` gives a stdio server a pipe for its stderr and logs its lines at debug,
  prefixed with the server's name, bounded, with the configured secrets masked — nothing of it
  reaches the user's terminal.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
import httpx2
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from tackroom.workers.mcp.config import ServerConfig
from tackroom.workers.mcp.errors import mask

__all__ = [
    "StderrPump",
    "http_transport",
    "nothing_sent",
    "stdio_transport",
    "stop_task",
    "watched",
]

_log = logging.getLogger("tackroom.workers.mcp")

MAX_LINE = 2000
"""Characters of one stderr line kept in the log (the rest is cut)."""
_CHUNK = 4096


class _WatchedReadStream:
    """The transport's read stream; calls ``on_end`` when it reaches its end or is closed."""

    def __init__(
        self, inner: ReadStream[SessionMessage | Exception], on_end: Callable[[], None]
    ) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's context off context-aware streams (HTTP).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        self._on_end()
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def watched(
    transport: AbstractAsyncContextManager[TransportStreams], on_end: Callable[[], None]
) -> AbstractAsyncContextManager[TransportStreams]:
    """``transport`` whose read stream calls ``on_end`` when the server's side ends."""

    @asynccontextmanager
    async def wrapper() -> AsyncIterator[TransportStreams]:
        async with transport as (read_stream, write_stream):
            yield _WatchedReadStream(read_stream, on_end), write_stream

    return wrapper()


def stdio_transport(
    config: ServerConfig, env: dict[str, str], pump: StderrPump
) -> AbstractAsyncContextManager[TransportStreams]:
    assert config.command is not None
    program, *args = config.command
    parameters = StdioServerParameters(
        command=program,
        args=args,
        env=env or None,
        cwd=str(config.cwd) if config.cwd is not None else None,
    )
    return stdio_client(parameters, errlog=pump.errlog)


@asynccontextmanager
async def http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable HTTP transport on a client sending ``headers`` (the SDK's own
    timeouts: 30 s to connect, 300 s between bytes of a response stream)."""
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


def nothing_sent(exc: BaseException) -> bool:
    """Whether ``exc`` (a transport's failure, maybe a group of them) is only HTTP connections
    that could not be opened: the server was unreachable, no request reached it."""
    if isinstance(exc, BaseExceptionGroup):
        return bool(exc.exceptions) and all(nothing_sent(inner) for inner in exc.exceptions)
    return isinstance(exc, httpx2.ConnectError)


class StderrPump:
    """A pipe for one stdio server process's stderr, read into the log line by line.

    ``errlog`` is the write end to hand to the SDK (the child's stderr); call
    :meth:`child_started` once the process exists so the parent's copy closes, and run
    :meth:`pump` as a task for the connection's lifetime. ``tail`` keeps the last lines, to say
    why a server that exits at start did.
    """

    def __init__(self, server: str, *, max_lines: int, secrets: list[str]) -> None:
        self.server = server
        read_fd, write_fd = os.pipe()
        self.errlog = os.fdopen(write_fd, "w", encoding="utf-8")
        self._read = os.fdopen(read_fd, "rb", buffering=0)
        self._max_lines = max_lines
        self._secrets = secrets
        self._logged = 0
        self.tail: deque[str] = deque(maxlen=5)

    def child_started(self) -> None:
        self.errlog.close()

    def close(self) -> None:
        self.errlog.close()
        self._read.close()

    def _emit(self, raw: bytes) -> None:
        line = mask(raw.decode("utf-8", "replace").rstrip("\r\n"), self._secrets)[:MAX_LINE]
        if not line.strip():
            return
        self.tail.append(line)
        self._logged += 1
        if self._logged <= self._max_lines:
            _log.debug("mcp %s: %s", self.server, line)
        elif self._logged == self._max_lines + 1:
            _log.debug("mcp %s: more stderr lines than stderr_lines; not logged", self.server)

    async def pump(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_CHUNK * 4)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self._read
        )
        pending = b""
        try:
            while chunk := await reader.read(_CHUNK):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                if len(pending) > MAX_LINE * 4:
                    lines.append(pending)
                    pending = b""
                for line in lines:
                    self._emit(line)
            if pending:
                self._emit(pending)
        finally:
            transport.close()


async def stop_task(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` and wait until it has ended; its own outcome is dropped, while a
    cancellation of the caller still propagates."""
    if task is None:
        return
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()
