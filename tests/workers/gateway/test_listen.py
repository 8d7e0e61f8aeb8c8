"""The gateway's listening socket says it is TCP, so asyncio turns Nagle's algorithm off on
every connection it accepts (without it, each request after the first on a kept-alive
connection and each SSE event waited ~40 ms for a delayed ACK)."""

from __future__ import annotations

import asyncio
import socket

from tackroom.workers.gateway.server import _listen


async def test_accepted_connections_have_nagle_off() -> None:
    listener = _listen("127.0.0.1", 0)
    assert listener.proto == socket.IPPROTO_TCP
    nodelay: list[int] = []
    answered = asyncio.Event()

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = writer.get_extra_info("socket")
        nodelay.append(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        answered.set()
        writer.close()

    server = await asyncio.start_server(on_client, sock=listener)
    async with server:
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.wait_for(answered.wait(), 10)
        writer.close()
        await writer.wait_closed()
    assert nodelay[0] != 0
