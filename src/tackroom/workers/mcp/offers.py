"""The bridge's own functions over all servers: status, resources and prompts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import mcp_types as types
from mcp import Client

from tackroom.contracts.mcp import (
    MCP_RESOURCES_READ,
    NOT_SUPPORTED,
    UNKNOWN_SERVER,
    GetPromptRequest,
    GetPromptResponse,
    ListPromptsResponse,
    ListResourcesResponse,
    PromptInfo,
    ReadResourceRequest,
    ReadResourceResponse,
    ResourceInfo,
    ResourceTemplateInfo,
    ServerFilter,
    ServersRequest,
    ServersResponse,
)
from tackroom.contracts.provenance import untrusted_label
from tackroom.contracts.tools import CallContext
from tackroom.engine.errors import FunctionError
from tackroom.workers.mcp.convert import (
    prompt_info,
    prompt_messages,
    resource_contents,
    resource_info,
    template_info,
)
from tackroom.workers.mcp.link import ServerLink
from tackroom.workers.mcp.listing import pages

__all__ = ["Offers"]

T = TypeVar("T")


def _require(client: Client, server: str, kind: str) -> None:
    capabilities = client.server_capabilities
    offered = capabilities.resources if kind == "resources" else capabilities.prompts
    if offered is None:
        raise FunctionError(NOT_SUPPORTED, f"MCP server {server!r} offers no {kind}")


class Offers:
    """Serves ``mcp::servers``, ``mcp::resources::*`` and ``mcp::prompts::*``."""

    def __init__(self, links: Mapping[str, ServerLink]) -> None:
        self._links = links

    def _link(self, server: str) -> ServerLink:
        link = self._links.get(server)
        if link is None:
            known = ", ".join(sorted(self._links)) or "none"
            raise FunctionError(
                UNKNOWN_SERVER, f"no MCP server is named {server!r} (configured: {known})"
            )
        return link

    async def _each(
        self, server: str | None, fetch: Callable[[ServerLink], Awaitable[list[T]]]
    ) -> tuple[list[T], list[str]]:
        """``fetch`` on one server (waiting for it), or on every connected one (servers down or
        failing are named in the second list; ones without the feature are skipped)."""
        if server is not None:
            return await fetch(self._link(server)), []
        links = sorted(self._links.values(), key=lambda link: link.name)
        found: list[T] = []
        unavailable = [link.name for link in links if not link.connected]
        up = [link for link in links if link.connected]
        outcomes = await asyncio.gather(*(fetch(link) for link in up), return_exceptions=True)
        for link, outcome in zip(up, outcomes, strict=True):
            if isinstance(outcome, FunctionError) and outcome.code == NOT_SUPPORTED:
                continue
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                unavailable.append(link.name)
                continue
            found.extend(outcome)
        return found, sorted(unavailable)

    async def servers(
        self, request: ServersRequest, call: CallContext | None = None
    ) -> ServersResponse:
        return ServersResponse(servers=[self._links[name].status() for name in sorted(self._links)])

    async def list_resources(
        self, request: ServerFilter, call: CallContext | None = None
    ) -> ListResourcesResponse:
        async def resources(link: ServerLink) -> list[ResourceInfo | ResourceTemplateInfo]:
            async def fetch(client: Client) -> list[ResourceInfo | ResourceTemplateInfo]:
                _require(client, link.name, "resources")
                listed = await pages(
                    lambda c: client.list_resources(cursor=c), lambda page: page.resources
                )
                templates = await pages(
                    lambda c: client.list_resource_templates(cursor=c),
                    lambda page: page.resource_templates,
                )
                return [resource_info(link.name, item) for item in listed] + [
                    template_info(link.name, item) for item in templates
                ]

            return await link.request("resources/list", fetch)

        found, unavailable = await self._each(request.server, resources)
        return ListResourcesResponse(
            resources=[item for item in found if isinstance(item, ResourceInfo)],
            templates=[item for item in found if isinstance(item, ResourceTemplateInfo)],
            unavailable=unavailable,
        )

    async def read_resource(
        self, request: ReadResourceRequest, call: CallContext | None = None
    ) -> ReadResourceResponse:
        link = self._link(request.server)

        async def read(client: Client) -> types.ReadResourceResult:
            _require(client, link.name, "resources")
            return await client.read_resource(request.uri)

        result = await link.request(f"reading {request.uri}", read)
        return ReadResourceResponse(
            server=link.name,
            uri=request.uri,
            contents=resource_contents(result),
            label=None
            if link.config.trusted
            else untrusted_label(MCP_RESOURCES_READ.id, f"mcp:{link.name}"),
        )

    async def list_prompts(
        self, request: ServerFilter, call: CallContext | None = None
    ) -> ListPromptsResponse:
        async def prompts(link: ServerLink) -> list[PromptInfo]:
            async def fetch(client: Client) -> list[PromptInfo]:
                _require(client, link.name, "prompts")
                listed = await pages(
                    lambda c: client.list_prompts(cursor=c), lambda page: page.prompts
                )
                return [prompt_info(link.name, item) for item in listed]

            return await link.request("prompts/list", fetch)

        found, unavailable = await self._each(request.server, prompts)
        return ListPromptsResponse(prompts=found, unavailable=unavailable)

    async def get_prompt(
        self, request: GetPromptRequest, call: CallContext | None = None
    ) -> GetPromptResponse:
        link = self._link(request.server)

        async def get(client: Client) -> types.GetPromptResult:
            _require(client, link.name, "prompts")
            return await client.get_prompt(request.name, request.arguments or None)

        result = await link.request(f"the prompt {request.name!r}", get)
        return GetPromptResponse(
            server=link.name,
            name=request.name,
            description=result.description,
            messages=prompt_messages(result),
        )
