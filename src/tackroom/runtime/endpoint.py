"""The local endpoint: other processes on this machine trigger functions over a Unix socket.

``tackroom serve`` on the embedded engine listens on ``endpoint.socket`` (owner-only: the socket
is 0600, a directory it creates is 0700, and one other users may write is made private when it
is ours and refused otherwise, since they could rename the socket away). It is a door into the
one engine, not a network service and not a second engine: each request frame becomes one
``engine.trigger`` — except ``endpoint::stream::*``, which the endpoint answers itself: a stream
subscription held for the connection (:mod:`tackroom.runtime.follows`), so a process attached
here sees live frames too. Frames are described in :mod:`tackroom.runtime.wire`; many requests
may be in flight on one connection and answers come back in completion order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
from pathlib import Path
from typing import Any

from opentelemetry import context, propagate

from tackroom.engine.embedded.files import secure_directory
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine
from tackroom.runtime.config import DEFAULT_MAX_FRAME_BYTES
from tackroom.runtime.errors import EndpointError, EndpointInUse, FrameTooLarge, InvalidFrame
from tackroom.runtime.follows import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_STREAMS,
    LOCAL_FUNCTIONS,
    StreamHandles,
)
from tackroom.runtime.tasks import TaskSet
from tackroom.runtime.wire import (
    FrameId,
    RequestFrame,
    encode_frame,
    error_frame,
    parse_request,
    read_frame,
    result_frame,
    socket_path_problem,
)

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "LocalEndpoint"]

DEFAULT_MAX_IN_FLIGHT = 256

_log = logging.getLogger("tackroom.endpoint")


class LocalEndpoint:
    """Serves ``engine.trigger`` on a Unix socket at ``path``."""

    def __init__(
        self,
        engine: Engine,
        *,
        path: Path,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_streams: int = DEFAULT_MAX_STREAMS,
        stream_idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self.engine = engine
        self.path = path
        self.max_frame_bytes = max_frame_bytes
        self.max_in_flight = max_in_flight
        self.max_streams = max_streams
        """Stream subscriptions one connection may hold open (``endpoint::stream::open``)."""
        self.stream_idle_timeout = stream_idle_timeout
        """Seconds an open subscription may go without ``endpoint::stream::next`` before the
        endpoint closes it."""
        self._server: asyncio.Server | None = None
        self._connections = TaskSet(owner="local endpoint")
        self._open: set[_Connection] = set()
        self._identity: tuple[int, int] | None = None
        self._accepting = False

    def prepare_directory(self) -> None:
        """Create the socket's directory owner-only (0700), or make sure no other user may
        change it (:func:`~tackroom.engine.embedded.files.secure_directory`).

        The host calls this before the engine starts, so a directory the two share (the default
        ``.tackroom/``) is created private rather than with the process umask. A socket path
        too long to bind is refused first, before anything is created.
        """
        problem = socket_path_problem(self.path)
        if problem is not None:
            raise EndpointError(problem)
        secure_directory(self.path.parent)

    async def start(self) -> None:
        self.prepare_directory()
        await _clear_stale_socket(self.path)
        sock = _bind_private(self.path)
        info = self.path.stat()
        self._identity = (info.st_dev, info.st_ino)
        self._accepting = True
        self._server = await asyncio.start_unix_server(
            self._accept, sock=sock, limit=self.max_frame_bytes
        )

    async def close(self) -> None:
        """Stop listening, cancel in-flight requests, remove the socket file."""
        self._accepting = False
        server, self._server = self._server, None
        if server is not None:
            server.close()
        await self._connections.cancel_all()
        if server is not None:
            await server.wait_closed()
        self._remove_socket()

    @property
    def open_streams(self) -> int:
        """Stream subscriptions the connections hold now."""
        return sum(len(connection.streams) for connection in self._open)

    def _remove_socket(self) -> None:
        if self._identity is None:
            return
        with contextlib.suppress(FileNotFoundError):
            info = self.path.stat()
            if (info.st_dev, info.st_ino) == self._identity:
                self.path.unlink()
        self._identity = None

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._accepting:  # accepted in the same loop turn as close()
            writer.close()
            return
        connection = _Connection(self, reader, writer)
        self._open.add(connection)
        task = self._connections.spawn(connection.serve(), name="tackroom-endpoint-connection")
        task.add_done_callback(lambda _: self._open.discard(connection))


class _Connection:
    def __init__(
        self, endpoint: LocalEndpoint, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.engine = endpoint.engine
        self.max_frame_bytes = endpoint.max_frame_bytes
        self.reader = reader
        self.writer = writer
        self.in_flight = asyncio.Semaphore(endpoint.max_in_flight)
        self.ids: set[FrameId] = set()
        self.write_lock = asyncio.Lock()
        self.requests = TaskSet(owner="local endpoint connection")
        self.streams = StreamHandles(
            endpoint.engine,
            max_open=endpoint.max_streams,
            idle_timeout=endpoint.stream_idle_timeout,
            max_batch_bytes=max(endpoint.max_frame_bytes - 1024, endpoint.max_frame_bytes // 2),
        )

    async def serve(self) -> None:
        try:
            await self._read_loop()
            # The client is gone (or sends no more): its subscriptions end now, and a ``next``
            # waiting on one answers at once instead of at the end of its wait.
            await self.streams.close_all()
            await self.requests.wait_all()
        except ConnectionError:
            pass
        finally:
            await self.streams.close_all()
            await self.requests.cancel_all()
            self.writer.close()
            with contextlib.suppress(ConnectionError):
                await self.writer.wait_closed()

    async def _read_loop(self) -> None:
        while True:
            try:
                line = await read_frame(self.reader, limit=self.max_frame_bytes)
            except FrameTooLarge as exc:
                await self._send(error_frame(None, exc))
                continue
            if line is None:
                return
            if not line.strip():
                continue
            try:
                request = parse_request(line)
            except InvalidFrame as exc:
                await self._send(error_frame(exc.frame_id, exc))
                continue
            if request.id in self.ids:
                duplicate = InvalidFrame(f"request id {request.id!r} is already in flight")
                await self._send(error_frame(request.id, duplicate))
                continue
            await self.in_flight.acquire()
            self.ids.add(request.id)
            self.requests.spawn(self._handle(request), name=f"endpoint {request.function_id}")

    async def _handle(self, request: RequestFrame) -> None:
        try:
            frame = result_frame(request.id, await self._trigger(request))
        except EngineError as exc:
            frame = error_frame(request.id, exc)
        finally:
            self.ids.discard(request.id)
            self.in_flight.release()
        with contextlib.suppress(ConnectionError):
            await self._send(frame)

    async def _trigger(self, request: RequestFrame) -> Any:
        token = context.attach(propagate.extract(request.headers)) if request.headers else None
        try:
            if request.function_id in LOCAL_FUNCTIONS:
                return await self.streams.call(request.function_id, request.payload)
            return await self.engine.trigger(
                request.function_id, request.payload, timeout=request.timeout
            )
        except EngineError:
            raise
        except Exception as exc:
            _log.exception("endpoint: trigger of %r failed", request.function_id)
            error = EngineError(f"{type(exc).__name__}: {exc}")
            error.code = "internal"
            raise error from exc
        finally:
            if token is not None:
                context.detach(token)

    async def _send(self, frame: dict[str, Any]) -> None:
        data = encode_frame(frame)  # results are JSON values: the engine checks them
        if len(data) > self.max_frame_bytes:
            too_large = FrameTooLarge(
                f"response of {len(data)} bytes is longer than the limit of "
                f"{self.max_frame_bytes} bytes"
            )
            data = encode_frame(error_frame(frame["id"], too_large))
        async with self.write_lock:
            self.writer.write(data)
            await self.writer.drain()


async def _clear_stale_socket(path: Path) -> None:
    """Remove a socket file left by a crashed process; refuse if a process still answers."""
    if not _socket_exists(path):
        return
    try:
        _, writer = await asyncio.open_unix_connection(path)
    except (ConnectionRefusedError, FileNotFoundError):
        _log.info("removing stale endpoint socket %s", path)
        _unlink(path)
        return
    except OSError as exc:
        raise EndpointError(f"cannot probe existing socket {path}: {exc}") from exc
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    raise EndpointInUse(path)


def _socket_exists(path: Path) -> bool:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(info.st_mode):
        raise EndpointError(f"{path} exists and is not a socket; refusing to replace it")
    return True


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)


def _bind_private(path: Path) -> socket.socket:
    """A listening-ready socket bound at ``path`` that only its owner can connect to."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(os.fspath(path))
    except OSError as exc:
        sock.close()
        raise EndpointError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    return sock
