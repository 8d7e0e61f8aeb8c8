"""A server's tools kept in step with its listings: new ones registered, vanished ones
unregistered, changed ones re-registered, unchanged ones left alone."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from tackroom.contracts.mcp import ToolCallDetails, ToolCallResult
from tackroom.contracts.tools import traits_of
from tackroom.engine import Engine
from tackroom.runtime.worker import WorkerContext
from tackroom.testing.engines import memory_engine
from tackroom.workers.mcp.config import McpConfig, ServerConfig
from tackroom.workers.mcp.tools import ServerTools

CONFIG = ServerConfig(command=["x"], deny_tools=["secret_*"])


def tool(name: str, *, description: str = "", **properties: Any) -> types.Tool:
    schema = {"type": "object", "properties": properties}
    return types.Tool(name=name, description=description, input_schema=schema)


async def catalog(engine: Engine) -> dict[str, Any]:
    return {info.function_id: info for info in await engine.list_functions()}


async def test_listings_register_unregister_and_reregister() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    async def call(name: str, arguments: dict[str, Any]) -> ToolCallResult:
        calls.append((name, arguments))
        return ToolCallResult(details=ToolCallDetails(server="s", tool=name))

    async with memory_engine() as engine:
        ctx = WorkerContext[McpConfig](engine=engine, name="mcp", config=McpConfig())
        tools = ServerTools(ctx, "s", CONFIG, call)
        await tools.sync([tool("a.b"), tool("keep", x={"type": "string"}), tool("secret_x")])
        assert tools.function_ids == ["mcp::s::a_b", "mcp::s::keep"]
        assert tools.hidden == ["secret_x"]

        reply = await engine.trigger("mcp::s::a_b", {"q": 1, "_call": {"session_id": "s"}})
        assert reply["details"]["tool"] == "a.b"
        assert calls == [("a.b", {"q": 1})]  # the original name, without _call

        await tools.sync(
            [tool("keep", x={"type": "string"}), tool("new", description="fresh", y={})]
        )
        after = await catalog(engine)
        assert tools.function_ids == ["mcp::s::keep", "mcp::s::new"]
        assert "mcp::s::a_b" not in after
        assert after["mcp::s::new"].description == "fresh"
        assert len(ctx.registrations) == 3  # a_b, keep, new: keep was left alone
        assert traits_of(after["mcp::s::keep"].request_schema).timeout == 62.0

        await tools.sync([tool("keep", x={"type": "integer"}), tool("new", description="fresh")])
        changed = (await catalog(engine))["mcp::s::keep"].request_schema or {}
        assert changed["properties"]["x"] == {"type": "integer"}
        assert len(ctx.registrations) == 5  # keep and new changed: registered again

        await tools.unregister_all()
        assert not [f for f in await catalog(engine) if f.startswith("mcp::s::")]
        await ctx.close()
