"""What a server offers: its tools, resources, resource templates and prompts, page by page."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

__all__ = ["MAX_PAGES", "Listing", "list_server", "pages"]

_log = logging.getLogger("tackroom.workers.mcp")

MAX_PAGES = 50
"""Pages read of one listing at most: a server whose cursor never ends cannot hang the bridge."""

T = TypeVar("T")


class _Page(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


P = TypeVar("P", bound=_Page)


@dataclass(slots=True)
class Listing:
    tools: list[types.Tool] = field(default_factory=list)
    resources: int = 0
    templates: int = 0
    prompts: int = 0


async def pages(
    fetch: Callable[[str | None], Awaitable[P]], items: Callable[[P], list[T]]
) -> list[T]:
    """Every item of a paginated listing (at most :data:`MAX_PAGES` pages)."""
    found: list[T] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        found.extend(items(page))
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


async def _count(server: str, what: str, listing: Awaitable[list[T]]) -> int:
    """How many items a secondary listing has; a server that refuses it has none."""
    try:
        return len(await listing)
    except MCPError as exc:
        _log.debug("mcp %s: listing %s failed: %s", server, what, exc.message)
        return 0


async def list_server(client: Client, *, server: str) -> Listing:
    """The server's tools (whole) and how many resources, templates and prompts it has, by
    what its capabilities announce."""
    capabilities = client.server_capabilities
    listing = Listing()
    if capabilities.tools is not None:
        listing.tools = await pages(
            lambda cursor: client.list_tools(cursor=cursor), lambda page: page.tools
        )
    if capabilities.resources is not None:
        listing.resources = await _count(
            server,
            "resources",
            pages(lambda c: client.list_resources(cursor=c), lambda page: page.resources),
        )
        listing.templates = await _count(
            server,
            "resource templates",
            pages(
                lambda c: client.list_resource_templates(cursor=c),
                lambda page: page.resource_templates,
            ),
        )
    if capabilities.prompts is not None:
        listing.prompts = await _count(
            server,
            "prompts",
            pages(lambda c: client.list_prompts(cursor=c), lambda page: page.prompts),
        )
    return listing
