"""A minimal HTTP/1.1 server on asyncio streams, enough for the official LLM SDKs.

It reads requests (``Content-Length`` or chunked bodies, keep-alive) and writes plain responses
or chunked event streams, and it can end a stream the ways real servers fail: cleanly before
the end of the message (``truncate``), or by closing the socket in the middle of a chunked body
(``disconnect``: the client sees an incomplete chunked read). Everything the client sent before
the break is delivered first — the close is a FIN after the data, never a reset that could
drop it — so tests see the same frames every run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HTTPRequest", "HTTPServer", "ResponseWriter"]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}
_MAX_LINE = 64 * 1024


@dataclass(slots=True)
class HTTPRequest:
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    """Header names in lower case."""
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class ResponseWriter:
    """Writes one response; ``keep_alive`` is false once the connection must close."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.keep_alive = True

    def _head(self, status: int, headers: Iterable[tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def send(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        pairs = [("content-type", content_type), ("content-length", str(len(body)))]
        pairs += list((headers or {}).items())
        self._writer.write(self._head(status, pairs) + body)
        await self._writer.drain()

    async def send_json(
        self, status: int, data: Any, *, headers: Mapping[str, str] | None = None
    ) -> None:
        await self.send(status, json.dumps(data).encode(), headers=headers)

    async def start_stream(
        self, *, content_type: str = "text/event-stream", headers: Mapping[str, str] | None = None
    ) -> None:
        pairs = [
            ("content-type", content_type),
            ("transfer-encoding", "chunked"),
            ("cache-control", "no-cache"),
        ]
        pairs += list((headers or {}).items())
        self._writer.write(self._head(200, pairs))

    def chunk(self, data: bytes) -> None:
        """Queue one chunk of a chunked body (call :meth:`flush` to wait for the socket)."""
        if data:
            self._writer.write(b"%x\r\n%s\r\n" % (len(data), data))

    async def flush(self) -> None:
        await self._writer.drain()

    async def end_stream(self) -> None:
        """End the chunked body normally."""
        self._writer.write(b"0\r\n\r\n")
        await self._writer.drain()

    async def disconnect(self) -> None:
        """Close the connection mid-body: everything written so far arrives, then EOF."""
        self.keep_alive = False
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()


Handler = Callable[[HTTPRequest, ResponseWriter], Awaitable[None]]


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readline()
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readline()


async def _read_request(reader: asyncio.StreamReader) -> HTTPRequest | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length") or 0)
        body = await reader.readexactly(length) if length else b""
    return HTTPRequest(method=method.upper(), path=target, headers=headers, body=body)


class HTTPServer:
    """Serves ``handler`` on ``host:port`` (port 0: a free one) until :meth:`close`."""

    def __init__(self, handler: Handler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def host(self) -> str:
        return self._host

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self._host, self._port, limit=_MAX_LINE
        )

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections):
            writer.close()
        await self._server.wait_closed()
        self._server = None
        if self._tasks:  # each handler sees EOF and ends; do not leave one to be cancelled
            _, stuck = await asyncio.wait(set(self._tasks), timeout=2.0)
            for task in stuck:
                task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                response = ResponseWriter(writer)
                await self._handler(request, response)
                if not response.keep_alive or request.headers.get("connection") == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._connections.discard(writer)
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
