"""The ``mcp`` bridge worker's public face: its functions, payload models and error codes.

The bridge connects to the MCP servers listed in its config and registers each allowed tool of
server ``S`` as the function ``mcp::S::<tool>`` (:func:`tool_function_id`), whose request schema
is the tool's own input schema (with tackroom traits under ``x-tackroom``) and whose reply is a
:class:`ToolCallResult`. Beside the tools it serves the fixed functions below: the servers'
status, their resources and their prompts.

A tool result is *result-shaped* (``content`` blocks, ``is_error``, ``details``): the
orchestrator passes text and images to the model as they are, and an MCP ``isError`` result
reaches the model as an error result carrying the server's own words — not as a
``FunctionError`` — so the model can correct itself. Failures of the bridge itself are
``FunctionError`` codes: :data:`SERVER_UNAVAILABLE` (the server is down or reconnecting; a
transient code, so the orchestrator retries an idempotent tool), :data:`CALL_INTERRUPTED` (the
connection ended while the call ran: it may or may not have had its effect), ``timeout``, and
:data:`MCP_ERROR` (the server answered with a protocol error).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tackroom.contracts._base import Strict
from tackroom.contracts._base import Strict as _Item
from tackroom.contracts._base import Strict as _Request
from tackroom.contracts.bus import Tool
from tackroom.contracts.labelled import LabelledReply
from tackroom.contracts.messages import ResultBlock

__all__ = [
    "CALL_INTERRUPTED",
    "FUNCTION_PREFIX",
    "MCP_ERROR",
    "MCP_PROMPTS_GET",
    "MCP_PROMPTS_LIST",
    "MCP_RESOURCES_LIST",
    "MCP_RESOURCES_READ",
    "MCP_SERVERS",
    "NOT_SUPPORTED",
    "RESERVED_SERVER_NAMES",
    "SERVER_NAME_PATTERN",
    "SERVER_UNAVAILABLE",
    "TIMEOUT",
    "UNKNOWN_SERVER",
    "GetPromptRequest",
    "GetPromptResponse",
    "ListPromptsResponse",
    "ListResourcesResponse",
    "PromptArgumentInfo",
    "PromptInfo",
    "PromptMessageItem",
    "ReadResourceRequest",
    "ReadResourceResponse",
    "ResourceContentsItem",
    "ResourceInfo",
    "ResourceTemplateInfo",
    "ServerFilter",
    "ServerState",
    "ServerStatus",
    "ServersRequest",
    "ServersResponse",
    "ToolCallDetails",
    "ToolCallResult",
    "tool_function_id",
]

FUNCTION_PREFIX = "mcp::"

SERVER_UNAVAILABLE = "unavailable"
"""The server is not connected (starting, down, reconnecting with backoff): try again later.
One of ``TRANSIENT_ERROR_CODES``: the orchestrator retries an idempotent tool's call."""
CALL_INTERRUPTED = "mcp_call_interrupted"
"""The connection to the server ended while the call was running (the server died, say): the
call may or may not have had its effect. Not transient: nothing retries it on its own."""
TIMEOUT = "timeout"
"""The server did not answer within the server's ``timeout``; the bridge cancelled the request."""
MCP_ERROR = "mcp_error"
"""The server answered with an MCP protocol error (an unknown tool, an internal error) or with a
reply the SDK could not read."""
UNKNOWN_SERVER = "unknown_server"
"""No configured server has that name."""
NOT_SUPPORTED = "not_supported"
"""The server does not offer that kind of thing (resources, prompts)."""

SERVER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"
"""A server name: a letter or digit, then letters, digits, ``_`` or ``-``; at most 32."""
RESERVED_SERVER_NAMES = frozenset({"servers", "resources", "prompts"})
"""Names the bridge's own functions use (``mcp::resources::list``): no server may take them."""


def tool_function_id(server: str, tool: str) -> str:
    """The function id a server's (sanitized) tool name is registered under."""
    return f"{FUNCTION_PREFIX}{server}::{tool}"


class _Response(Strict):
    schema_version: int = 1


# -- tool calls ------------------------------------------------------------------------------


class ToolCallDetails(_Item):
    server: str
    tool: str = Field(description="the tool's name on the server (before sanitizing)")
    structured: Any = Field(
        default=None, description="the tool's structuredContent, when it returned one"
    )


class ToolCallResult(_Response):
    """What ``mcp::<server>::<tool>`` returns. ``content`` is what the model reads: text as text,
    images as images, embedded text resources as text headed by their URI, and a one-line note
    for audio, binary resources and resource links."""

    content: list[ResultBlock] = Field(default_factory=list)
    is_error: bool = Field(
        default=False, description="the server marked the result as a tool error (isError)"
    )
    details: ToolCallDetails


# -- servers ---------------------------------------------------------------------------------


class ServersRequest(_Request):
    pass


ServerState = Literal["connecting", "connected", "reconnecting", "stopped"]


class ServerStatus(_Item):
    name: str
    transport: Literal["stdio", "http"]
    state: ServerState
    server_name: str | None = Field(default=None, description="what the server calls itself")
    server_version: str | None = None
    protocol_version: str | None = None
    tools: list[str] = Field(
        default_factory=list, description="function ids of the tools registered for it"
    )
    hidden_tools: list[str] = Field(
        default_factory=list, description="its tools left out by allow_tools / deny_tools"
    )
    resources: int = Field(default=0, description="resources listed at the last connection")
    resource_templates: int = 0
    prompts: int = 0
    connects: int = Field(default=0, description="successful connections so far")
    failures: int = Field(default=0, description="failed attempts since the last success")
    last_error: str | None = Field(
        default=None, description="why the last connection ended or failed (never a secret)"
    )


class ServersResponse(_Response):
    servers: list[ServerStatus]


# -- resources -------------------------------------------------------------------------------


class ServerFilter(_Request):
    server: str | None = Field(default=None, description="one server's name; default: all")


class ResourceInfo(_Item):
    server: str
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


class ResourceTemplateInfo(_Item):
    server: str
    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


class ListResourcesResponse(_Response):
    resources: list[ResourceInfo]
    templates: list[ResourceTemplateInfo]
    unavailable: list[str] = Field(
        default_factory=list, description="servers asked that are not connected now"
    )


class ReadResourceRequest(_Request):
    server: str
    uri: str = Field(min_length=1, max_length=8192)


class ResourceContentsItem(_Item):
    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = Field(default=None, description="base64 bytes of a binary resource")


class ReadResourceResponse(_Response, LabelledReply):
    """Labelled untrusted (``_label``) unless the server is configured ``trusted``."""

    server: str
    uri: str
    contents: list[ResourceContentsItem]


# -- prompts ---------------------------------------------------------------------------------


class PromptArgumentInfo(_Item):
    name: str
    description: str | None = None
    required: bool = False


class PromptInfo(_Item):
    server: str
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgumentInfo] = Field(default_factory=list)


class ListPromptsResponse(_Response):
    prompts: list[PromptInfo]
    unavailable: list[str] = Field(default_factory=list)


class GetPromptRequest(_Request):
    server: str
    name: str = Field(min_length=1, max_length=512)
    arguments: dict[str, str] = Field(default_factory=dict)


class PromptMessageItem(_Item):
    role: Literal["user", "assistant"]
    content: dict[str, Any] = Field(description="an MCP content block, as the protocol spells it")


class GetPromptResponse(_Response):
    server: str
    name: str
    description: str | None = None
    messages: list[PromptMessageItem]


MCP_SERVERS: Tool[ServersRequest, ServersResponse] = Tool(
    "mcp::servers",
    ServersRequest,
    ServersResponse,
    description="The configured MCP servers: connection state, tools, resources, prompts and "
    "the last error of each.",
    idempotent=True,
    read_only=True,
)
MCP_RESOURCES_LIST: Tool[ServerFilter, ListResourcesResponse] = Tool(
    "mcp::resources::list",
    ServerFilter,
    ListResourcesResponse,
    description="List the resources (and resource templates) the connected MCP servers offer, "
    "or one server's.",
    idempotent=True,
    read_only=True,
)
MCP_RESOURCES_READ: Tool[ReadResourceRequest, ReadResourceResponse] = Tool(
    "mcp::resources::read",
    ReadResourceRequest,
    ReadResourceResponse,
    description="Read one resource of an MCP server by its URI (text, or base64 for binary).",
    idempotent=True,
    read_only=True,
)
MCP_PROMPTS_LIST: Tool[ServerFilter, ListPromptsResponse] = Tool(
    "mcp::prompts::list",
    ServerFilter,
    ListPromptsResponse,
    description="List the prompt templates the connected MCP servers offer, or one server's.",
    idempotent=True,
    read_only=True,
)
MCP_PROMPTS_GET: Tool[GetPromptRequest, GetPromptResponse] = Tool(
    "mcp::prompts::get",
    GetPromptRequest,
    GetPromptResponse,
    description="Fill one prompt template of an MCP server with arguments; returns its messages.",
    idempotent=True,
    read_only=True,
)
