"""uvicorn, run by the worker inside the host's event loop.

The socket is bound when the worker starts (a port in use fails the start with one line, and
port 0 is resolved before anyone is told the URL). The server installs no signal handler — the
host owns SIGINT and SIGTERM — and stops when the worker's task is cancelled: the event streams
are closed first (so each ends cleanly), then uvicorn's own shutdown closes the listener and
waits up to ``shutdown_seconds`` for requests in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator

import uvicorn
from starlette.types import ASGIApp

__all__ = ["BindError", "HttpServer", "listen"]


class BindError(Exception):
    """The address cannot be listened on (one line)."""


class _AlreadyLogged(logging.Filter):
    """uvicorn reports a response the app left unfinished; the gateway does that only when it
    drops a stalled event stream or fails mid-stream, and logs each itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "ASGI callable returned without completing response."


_UNFINISHED = _AlreadyLogged()


class _HostedServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """The host's signals stay the host's: stopping is the worker's to ask."""
        yield


def listen(host: str, ports: range) -> socket.socket:
    """A listening socket on the first of ``ports`` that is free."""
    failure: BindError | None = None
    for port in ports:
        try:
            return _listen(host, port)
        except BindError as exc:
            failure = exc
    assert failure is not None
    raise failure


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host.strip("[]"), port), family=family, backlog=2048)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise BindError(
            f"the gateway cannot listen on {host}:{port}: {reason} (set"
            " worker_config.gateway.host/port)"
        ) from None
    # asyncio sets TCP_NODELAY on an accepted connection only when the listener's proto says TCP
    # (create_server leaves it 0); without it each request after the first on a keep-alive
    # connection, and each SSE event, waits ~40 ms (Nagle's algorithm and delayed ACKs).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=sock.detach())
    sock.setblocking(False)
    return sock


class HttpServer:
    def __init__(self, app: ASGIApp, *, host: str, ports: range, shutdown_seconds: int) -> None:
        self._socket = listen(host, ports)
        self.port: int = self._socket.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            ws="none",
            proxy_headers=False,
            server_header=False,
            timeout_graceful_shutdown=shutdown_seconds,
        )
        self._server = _HostedServer(config)
        logging.getLogger("uvicorn.error").addFilter(_UNFINISHED)  # once: filters are a set

    async def serve(self, *, before_stop: Callable[[], Awaitable[None]]) -> None:
        """Serve until cancelled; then ``before_stop``, and a graceful shutdown."""
        try:
            await self._server.serve(sockets=[self._socket])
        except asyncio.CancelledError:
            self._server.should_exit = True
            await before_stop()
            if self._server.started:
                await self._server.shutdown(sockets=[self._socket])
            raise
        finally:
            self._socket.close()

    def close(self) -> None:
        """Release the socket of a server that never served (its worker failed to start)."""
        self._socket.close()
