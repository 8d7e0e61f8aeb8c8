"""MCP SDK objects as the bridge's contract models (pure functions, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mcp_types as types

from tackroom.contracts.mcp import (
    PromptArgumentInfo,
    PromptInfo,
    PromptMessageItem,
    ResourceContentsItem,
    ResourceInfo,
    ResourceTemplateInfo,
    ToolCallDetails,
    ToolCallResult,
)
from tackroom.contracts.messages import ImageBlock, ResultBlock, TextBlock
from tackroom.contracts.tools import ToolTraits, with_traits
from tackroom.workers.mcp.config import ServerConfig, matches_any

__all__ = [
    "describe_tool",
    "prompt_info",
    "prompt_messages",
    "resource_contents",
    "resource_info",
    "result_blocks",
    "template_info",
    "tool_result",
    "tool_schema",
    "tool_traits",
]

# What the orchestrator adds to a call's limit, so the bridge's own typed ``timeout`` arrives
# before the orchestrator gives up on the call.
TIMEOUT_MARGIN = 2.0


def tool_traits(tool: types.Tool, config: ServerConfig) -> ToolTraits:
    """The tool's traits: ``read_only`` when the operator says so (``read_only_tools``, or
    ``trust_read_only_hints`` and the tool's ``readOnlyHint``), never on the server's word alone;
    ``idempotent`` when read-only or annotated ``idempotentHint`` (it only lets the orchestrator
    retry a call that failed with a transient error). A read-only tool may run beside other calls;
    anything else runs alone.

    Its results are untrusted unless the server is ``trusted``; a call is ``external`` (the server
    sees its arguments) unless the tool is read-only or a ``trusted`` server hints it is: an
    untrusted server's own claim never lifts the flow rules that watch what leaves.
    """
    hints = tool.annotations
    hinted = bool(hints is not None and hints.read_only_hint)
    read_only = matches_any(tool.name, config.read_only_tools) or (
        config.trust_read_only_hints and hinted
    )
    idempotent = read_only or bool(hints is not None and hints.idempotent_hint)
    return ToolTraits(
        idempotent=idempotent,
        parallel=read_only,
        read_only=read_only,
        timeout=config.timeout + TIMEOUT_MARGIN,
        untrusted_output=not config.trusted,
        side_effect="none" if read_only or (config.trusted and hinted) else "external",
    )


def tool_schema(tool: types.Tool, traits: ToolTraits) -> dict[str, Any]:
    """The tool's input schema as the function's request schema, with its traits."""
    schema = dict(tool.input_schema)
    schema.setdefault("type", "object")
    return with_traits(schema, traits)


def describe_tool(server: str, tool: types.Tool) -> str:
    text = (tool.description or "").strip()
    title = tool.title or (tool.annotations.title if tool.annotations else None)
    if not text:
        text = title or f"The {tool.name!r} tool of the MCP server {server!r}."
    return text


def _size_of(data: str) -> int:
    """Bytes behind base64 text (without decoding it)."""
    return len(data) * 3 // 4 - data.count("=", max(0, len(data) - 2))


def _resource_block(
    resource: types.TextResourceContents | types.BlobResourceContents,
) -> ResultBlock:
    if isinstance(resource, types.TextResourceContents):
        return TextBlock(text=f"[resource {resource.uri}]\n{resource.text}")
    mime = resource.mime_type or "application/octet-stream"
    if mime.startswith("image/"):
        return ImageBlock(mime=mime, data=resource.blob)
    return TextBlock(
        text=f"[resource {resource.uri}: {mime}, {_size_of(resource.blob)} bytes of binary data]"
    )


def _block(item: types.ContentBlock) -> ResultBlock:
    if isinstance(item, types.TextContent):
        return TextBlock(text=item.text)
    if isinstance(item, types.ImageContent):
        return ImageBlock(mime=item.mime_type, data=item.data)
    if isinstance(item, types.AudioContent):
        return TextBlock(text=f"[audio: {item.mime_type}, {_size_of(item.data)} bytes, not shown]")
    if isinstance(item, types.EmbeddedResource):
        return _resource_block(item.resource)
    about = f" - {item.description}" if item.description else ""
    return TextBlock(text=f"[resource link {item.uri}: {item.name}{about}]")


def result_blocks(content: Sequence[types.ContentBlock]) -> list[ResultBlock]:
    return [_block(item) for item in content]


def tool_result(server: str, tool: str, result: types.CallToolResult) -> ToolCallResult:
    return ToolCallResult(
        content=result_blocks(result.content),
        is_error=result.is_error,
        details=ToolCallDetails(server=server, tool=tool, structured=result.structured_content),
    )


def resource_info(server: str, resource: types.Resource) -> ResourceInfo:
    return ResourceInfo(
        server=server,
        uri=str(resource.uri),
        name=resource.name,
        title=resource.title,
        description=resource.description,
        mime_type=resource.mime_type,
        size=resource.size,
    )


def template_info(server: str, template: types.ResourceTemplate) -> ResourceTemplateInfo:
    return ResourceTemplateInfo(
        server=server,
        uri_template=template.uri_template,
        name=template.name,
        title=template.title,
        description=template.description,
        mime_type=template.mime_type,
    )


def resource_contents(result: types.ReadResourceResult) -> list[ResourceContentsItem]:
    items = []
    for item in result.contents:
        text = item.text if isinstance(item, types.TextResourceContents) else None
        blob = item.blob if isinstance(item, types.BlobResourceContents) else None
        items.append(
            ResourceContentsItem(uri=str(item.uri), mime_type=item.mime_type, text=text, blob=blob)
        )
    return items


def prompt_info(server: str, prompt: types.Prompt) -> PromptInfo:
    return PromptInfo(
        server=server,
        name=prompt.name,
        title=prompt.title,
        description=prompt.description,
        arguments=[
            PromptArgumentInfo(
                name=argument.name,
                description=argument.description,
                required=bool(argument.required),
            )
            for argument in prompt.arguments or []
        ],
    )


def prompt_messages(result: types.GetPromptResult) -> list[PromptMessageItem]:
    return [
        PromptMessageItem(
            role=message.role,
            content=message.content.model_dump(mode="json", by_alias=True, exclude_none=True),
        )
        for message in result.messages
    ]
