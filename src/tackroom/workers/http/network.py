"""Name resolution, and an httpx2 transport that connects only to addresses already checked.

The egress policy resolves a host itself and checks every address; :class:`PinnedTransport` then
connects to those addresses and nothing else — no second lookup a rebinding DNS server could
answer differently. The URL keeps its host name, so the ``Host`` header, TLS SNI and certificate
verification are all for the name, while the TCP connection goes to the checked address.

httpx2's own ``AsyncHTTPTransport`` takes no network backend, so this transport builds the
httpcore2 pool (which does) and converts requests and responses the way httpx2's does.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any

import httpcore2
import httpx2

from tackroom.workers.http.egress import IPAddress

__all__ = ["NotPinned", "PinnedBackend", "PinnedTransport", "Resolver", "system_resolver"]

Resolver = Callable[[str, int], Awaitable[Sequence[IPAddress]]]
"""``(host, port) -> addresses``: how the worker resolves a name (injectable for tests)."""

Pins = Mapping[tuple[str, int], Sequence[IPAddress]]
"""``(host as the URL spells it, port) -> the checked addresses to connect to, in order``."""


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """Every address ``getaddrinfo`` gives for ``host`` (TCP), without duplicates, in order."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    addresses = (ipaddress.ip_address(str(info[4][0])) for info in infos)
    return list(dict.fromkeys(addresses))


class NotPinned(Exception):
    """A connection to a host the egress policy did not check (never expected: a bug guard)."""


class PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connects ``(host, port)`` to its pinned addresses (the next on a refusal), nothing else."""

    def __init__(self, pins: Pins) -> None:
        self._pins = dict(pins)
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        addresses = self._pins.get((host, port))
        if not addresses:
            raise NotPinned(f"{host}:{port} was not checked by the egress policy")
        failure: httpcore2.ConnectError | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore2.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise NotPinned("unix sockets are not reachable through http::fetch")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Body(httpx2.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:
            yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class PinnedTransport(httpx2.AsyncBaseTransport):
    """An HTTP/1.1 transport whose connections go to pinned addresses only (one fetch's worth:
    a new transport per hop, so no connection outlives the check that allowed it)."""

    def __init__(self, pins: Pins, *, ssl_context: ssl.SSLContext) -> None:
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context,
            network_backend=PinnedBackend(pins),
            max_connections=1,
            http1=True,
            http2=False,
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        assert isinstance(request.stream, httpx2.AsyncByteStream)
        url = request.url
        core = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        response = await self._pool.handle_async_request(core)
        assert isinstance(response.stream, AsyncIterable)
        return httpx2.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
