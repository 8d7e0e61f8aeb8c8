"""The contract of an MCP bridge worker: an MCP server's tools as ``mcp::<server>::<tool>``
functions (and ``mcp::servers``), by function id.

Any worker that replaces ``mcp`` proves it fits by running this suite: subclass
:class:`McpContract` in a ``test_*.py`` module, name the worker, and implement
:meth:`McpContract.bridge_config`, the worker's config section bridging one MCP server under the
name :attr:`~McpContract.server`. :attr:`~McpContract.probe` says what the suite may expect of
that server (:class:`McpProbe`); by default it describes ``mcp-server-time`` (PyPI), run over
stdio with ``[sys.executable, "-m", "mcp_server_time"]``::

    class TestMyBridge(McpContract):
        worker_name = "my-mcp"

        def bridge_config(self, server: str) -> dict[str, Any]:
            return {"servers": {server: {"command": [sys.executable, "-m", "mcp_server_time"]}}}

Bridging another server, set ``probe`` to an :class:`McpProbe` of its tools and of one call it
answers and one it answers with a tool error. Each test starts the bridge (and so the server)
afresh. Per the bridge's contract (:mod:`tackroom.contracts.mcp`), a tool's reply is a
:class:`~tackroom.contracts.mcp.ToolCallResult`, and a tool error (MCP ``isError``) is such a
result with ``is_error: true`` carrying the server's words, not a failed call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from tackroom.contracts.mcp import (
    MCP_SERVERS,
    ServersResponse,
    ToolCallResult,
    tool_function_id,
)
from tackroom.engine import Engine
from tackroom.engine.errors import FunctionNotFound
from tackroom.testing.contracts.base import CONTRACT_TIMEOUT, WorkerContract

__all__ = ["TIME_PROBE", "McpContract", "McpProbe"]

CALL = {"_call": {"session_id": "s1", "function_call_id": "c1"}}
"""The call context the orchestrator adds to a tool call; the bridge keeps it from the server."""


@dataclass(frozen=True, slots=True)
class McpProbe:
    """What the suite expects of the MCP server it bridges (names as the server spells them)."""

    tools: frozenset[str]
    """Every tool the server lists (names that are already safe function id segments)."""
    tool: str
    """The tool the suite calls, one of :attr:`tools`."""
    arguments: dict[str, Any]
    """Arguments :attr:`tool` answers; each is a property of its input schema."""
    answer: str
    """Text the answer's content holds."""
    failing_arguments: dict[str, Any]
    """Arguments :attr:`tool` answers with a tool error (``isError``)."""
    error: str
    """Text the tool error's content holds."""
    structured: dict[str, Any] = field(default_factory=dict)
    """Items the answer's ``structuredContent`` holds (empty: not checked)."""


TIME_PROBE = McpProbe(
    tools=frozenset({"get_current_time", "convert_time"}),
    tool="convert_time",
    arguments={"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
    answer="+09:00",
    failing_arguments={"source_timezone": "UTC", "time": "25:99", "target_timezone": "UTC"},
    error="Invalid time format",
    structured={"time_difference": "+9.0h"},
)
"""``mcp-server-time``: 12:00 UTC is 21:00 in Tokyo, whatever the day; ``25:99`` is no time."""


class McpContract(WorkerContract):
    worker_name: ClassVar[str] = "mcp"
    server: ClassVar[str] = "probe"
    """The name the bridge knows the server by: its tools are ``mcp::<server>::<tool>``."""
    probe: ClassVar[McpProbe] = TIME_PROBE
    """What the server of :meth:`bridge_config` offers and answers."""

    def bridge_config(self, server: str) -> dict[str, Any]:
        """The worker's config section bridging the one MCP server :attr:`probe` describes under
        the name ``server``."""
        raise NotImplementedError(
            f"{type(self).__name__}.bridge_config: return the worker's config section bridging"
            " one MCP server (e.g. mcp-server-time over stdio) under the given name"
        )

    @pytest.fixture
    async def bus(self, engine_url: str) -> AsyncIterator[Engine]:
        async with self.hosted(engine_url, self.bridge_config(self.server)) as engine:
            yield engine

    def function_id(self, tool: str) -> str:
        return tool_function_id(self.server, tool)

    async def tool_call(self, bus: Engine, arguments: dict[str, Any]) -> ToolCallResult:
        reply = await self.call(bus, self.function_id(self.probe.tool), {**arguments, **CALL})
        return ToolCallResult.model_validate(reply)

    @staticmethod
    def text_of(result: ToolCallResult) -> str:
        return "\n".join(str(block.model_dump().get("text", "")) for block in result.content)

    # -- the tools as functions ----------------------------------------------------------------
    async def test_each_tool_is_a_function_with_its_schema(self, bus: Engine) -> None:
        catalog = {info.function_id: info for info in await bus.list_functions()}
        prefix = self.function_id("")
        tools = {fid: info for fid, info in catalog.items() if fid.startswith(prefix)}
        assert set(tools) == {self.function_id(tool) for tool in self.probe.tools}
        info = tools[self.function_id(self.probe.tool)]
        assert info.worker == catalog[MCP_SERVERS.id].worker  # the bridge serves them
        assert info.description
        schema = info.request_schema or {}
        assert schema.get("type") == "object"
        assert set(self.probe.arguments) <= set(schema["properties"])
        assert "_call" not in schema["properties"]
        assert info.response_schema is not None

    async def test_the_status_names_the_server_and_its_tools(self, bus: Engine) -> None:
        status = ServersResponse.model_validate(await self.call(bus, MCP_SERVERS.id, {}))
        [server] = [s for s in status.servers if s.name == self.server]
        assert server.state == "connected"
        assert server.connects >= 1
        assert sorted(server.tools) == sorted(self.function_id(t) for t in self.probe.tools)

    # -- calls ---------------------------------------------------------------------------------
    async def test_a_call_returns_the_servers_answer(self, bus: Engine) -> None:
        result = await self.tool_call(bus, self.probe.arguments)
        assert result.is_error is False
        assert self.probe.answer in self.text_of(result)
        assert (result.details.server, result.details.tool) == (self.server, self.probe.tool)
        if self.probe.structured:
            assert isinstance(result.details.structured, dict)
            assert self.probe.structured.items() <= result.details.structured.items()
        again = await self.tool_call(bus, self.probe.arguments)  # the session goes on
        assert self.probe.answer in self.text_of(again)

    async def test_a_tool_error_is_a_result_marked_as_error(self, bus: Engine) -> None:
        result = await self.tool_call(bus, self.probe.failing_arguments)
        assert result.is_error is True
        assert self.probe.error in self.text_of(result)
        assert self.probe.answer not in self.text_of(result)
        after = await self.tool_call(bus, self.probe.arguments)  # the server is still there
        assert after.is_error is False

    # -- refusals ------------------------------------------------------------------------------
    async def test_an_unknown_tool_is_no_function(self, bus: Engine) -> None:
        unknown = self.function_id("no_such_tool")
        assert unknown not in {info.function_id for info in await bus.list_functions()}
        with pytest.raises(FunctionNotFound):
            await bus.trigger(unknown, CALL, timeout=CONTRACT_TIMEOUT)

    async def test_arguments_that_are_not_an_object_are_refused(self, bus: Engine) -> None:
        function_id = self.function_id(self.probe.tool)
        for payload in ([1, 2], "12:00", 3):
            assert await self.code_of(bus, function_id, payload) == "invalid_request", payload
