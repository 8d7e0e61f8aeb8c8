"""One connection to an MCP server, and the small waits and delays around connections."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import anyio
from mcp import Client

__all__ = ["Connection", "backoff", "first_of"]


@dataclass(slots=True)
class Connection:
    client: Client
    ended: asyncio.Event
    """Set when the server's side ends or a request finds the connection dead."""
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the client is torn down and ``refused`` is known."""
    refused: bool = False
    """The connection ended because nothing more could be sent (an HTTP connection refused)."""

    async def refused_at_close(self, *, wait: float = 1.0) -> bool:
        """Whether the connection ended because the server could not be reached at all (so no
        request on it was delivered); waits up to ``wait`` seconds for the teardown to say."""
        try:
            async with asyncio.timeout(wait):
                await self.closed.wait()
        except TimeoutError:
            return False
        return self.refused

    async def alive(self, *, timeout: float) -> bool:
        """Whether the connection still answers (a tools/list within ``timeout``): an HTTP
        server that restarted forgets the session, and every request on it fails from then on."""
        if self.client.server_capabilities.tools is None:
            return True
        try:
            with anyio.fail_after(timeout):
                await self.client.list_tools()
        except Exception:
            return False
        return True


def backoff(streak: int, *, initial: float, limit: float) -> float:
    """The delay before the next attempt after ``streak`` bad ones in a row: ``initial``
    doubling up to ``limit``, give or take 10% so servers restarted together spread out."""
    base = initial * 2.0 ** min(max(streak - 1, 0), 30)
    return min(base, limit) * random.uniform(0.9, 1.1)


async def first_of(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
