"""The ``mcp`` worker: MCP servers' tools, resources and prompts as functions on the bus.

Each server of ``worker_config.mcp.servers`` (a stdio command or a streamable HTTP URL) gets a
supervisor task that keeps it connected; its allowed tools are ``mcp::<server>::<tool>``
functions that go through the orchestrator's gate like any other tool. The worker starts even
when a server does not: that server is reported in one warning line and retried with backoff.
See ``docs/workers/mcp.md``.
"""

from __future__ import annotations

import asyncio
import logging

from tackroom.contracts.mcp import (
    MCP_PROMPTS_GET,
    MCP_PROMPTS_LIST,
    MCP_RESOURCES_LIST,
    MCP_RESOURCES_READ,
    MCP_SERVERS,
)
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerContext, WorkerSpec
from tackroom.workers.mcp.config import McpConfig
from tackroom.workers.mcp.link import ServerLink
from tackroom.workers.mcp.offers import Offers

__all__ = ["WORKER", "McpConfig"]

_log = logging.getLogger("tackroom.workers.mcp")


async def _start(ctx: WorkerContext[McpConfig]) -> None:
    links = {name: ServerLink(ctx, name, config) for name, config in ctx.config.servers.items()}
    offers = Offers(links)

    await serve_tool(ctx, MCP_SERVERS, offers.servers)
    await serve_tool(ctx, MCP_RESOURCES_LIST, offers.list_resources)
    await serve_tool(ctx, MCP_RESOURCES_READ, offers.read_resource)
    await serve_tool(ctx, MCP_PROMPTS_LIST, offers.list_prompts)
    await serve_tool(ctx, MCP_PROMPTS_GET, offers.get_prompt)

    for name, link in links.items():
        ctx.spawn(link.supervise(), name=f"mcp server {name}")
    if links and ctx.config.start_timeout > 0:
        await _first_attempts(list(links.values()), timeout=ctx.config.start_timeout)


async def _first_attempts(links: list[ServerLink], *, timeout: float) -> None:
    """Wait until every server has connected or failed once, at most ``timeout`` seconds."""
    waiters = [asyncio.ensure_future(link.started.wait()) for link in links]
    try:
        await asyncio.wait(waiters, timeout=timeout)
    finally:
        for waiter in waiters:
            waiter.cancel()
    for link in links:
        if not link.started.is_set():
            _log.warning(
                "mcp: server %r (%s) is still connecting after %gs (start_timeout); its tools "
                "are registered when it connects",
                link.name, link.where, timeout,
            )  # fmt: skip


WORKER = WorkerSpec(
    name="mcp",
    description="MCP servers' tools as functions (mcp::<server>::<tool>), with their resources "
    "and prompts.",
    config_model=McpConfig,
    start=_start,
)
