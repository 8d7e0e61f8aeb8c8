"""A tiny scripted HTTP/1.1 server on 127.0.0.1 for tests of ``http::fetch`` (stdlib only).

Each path answers with a :class:`Reply` (status, headers, body), a function of the request, or
:data:`HANG` (never answers: for timeouts); every request is recorded::

    async with LocalHTTPServer({"/": Reply(body=b"hello")}) as server:
        url = server.url("/")          # http://127.0.0.1:PORT/
        ...
        server.received[0].headers["host"]

Pass ``ssl_context`` to serve HTTPS (:func:`self_signed` makes one with the ``openssl`` command).
One request per connection (``Connection: close``); unknown paths get a 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tackroom.engine.protocol import Running

__all__ = [
    "HANG",
    "LocalHTTPServer",
    "Received",
    "Reply",
    "closed_port",
    "redirect",
    "self_signed",
]

HANG = "hang"
"""A route that never answers (the connection stays open until the server closes)."""


@dataclass(frozen=True, slots=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    """Lower-case names; a repeated header keeps its last value."""
    body: bytes


@dataclass(frozen=True, slots=True)
class Reply:
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=lambda: {"Content-Type": "text/plain"})
    body: bytes = b""
    cut_short: bool = False
    """Announce the whole body's length, send half of it, and close the connection."""


Route = Reply | Callable[[Received], Reply] | str


def redirect(location: str, *, status: int = 302) -> Reply:
    return Reply(status=status, headers={"Location": location}, body=b"")


class LocalHTTPServer(Running):
    """Serves ``routes`` on ``127.0.0.1`` (a free port) while entered."""

    def __init__(
        self,
        routes: Mapping[str, Route] | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.received: list[Received] = []
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._hanging: set[asyncio.Event] = set()

    @property
    def port(self) -> int:
        assert self._port is not None, "the server is not started"
        return self._port

    @property
    def authority(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str = "/", *, host: str = "127.0.0.1") -> str:
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._ssl)
        self._port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        for event in self._hanging:
            event.set()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await _read_request(reader)
            if request is None:
                return
            self.received.append(request)
            route = self.routes.get(request.path.partition("?")[0], Reply(404, body=b"not found"))
            if route == HANG:
                hang = asyncio.Event()
                self._hanging.add(hang)
                await hang.wait()
                return
            reply = route(request) if callable(route) else route
            assert isinstance(reply, Reply)
            await _write_reply(writer, reply, head=request.method == "HEAD")
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> Received | None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(length) if length else b""
    return Received(method=method, path=path, headers=headers, body=body)


async def _write_reply(writer: asyncio.StreamWriter, reply: Reply, *, head: bool) -> None:
    lines = [f"HTTP/1.1 {reply.status} X"]
    names = {name.lower() for name in reply.headers}
    lines += [f"{name}: {value}" for name, value in reply.headers.items()]
    if "content-length" not in names:
        lines.append(f"Content-Length: {len(reply.body)}")
    lines.append("Connection: close")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    if not head:
        writer.write(reply.body[: len(reply.body) // 2] if reply.cut_short else reply.body)
    await writer.drain()


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def self_signed(directory: Path, *, name: str) -> tuple[ssl.SSLContext, Path] | None:
    """A server TLS context with a self-signed certificate for ``name`` (DNS) and the PEM file a
    client should trust, made with the ``openssl`` command; ``None`` when it is not installed."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert),
         "-addext", f"subjectAltName=DNS:{name}",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,digitalSignature,keyCertSign"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context, cert
