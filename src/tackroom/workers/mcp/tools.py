"""The functions registered for one server's tools, kept in step with its tool listings.

Each allowed tool of server ``S`` is the function ``mcp::S::<safe name>`` (see
:mod:`~tackroom.workers.mcp.naming`). A new listing (a reconnection, a ``list_changed``
notification) registers the tools that appeared, unregisters the ones that vanished and
re-registers a tool whose schema, description or traits changed. While the server is down its
tools stay registered: a call fails with ``unavailable`` until it is back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from tackroom.contracts.bus import dump
from tackroom.contracts.mcp import ToolCallResult, tool_function_id
from tackroom.contracts.tools import CALL_CONTEXT_KEY
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import LazySchema, Registration
from tackroom.runtime.worker import WorkerContext
from tackroom.workers.mcp.config import ServerConfig
from tackroom.workers.mcp.convert import describe_tool, tool_schema, tool_traits
from tackroom.workers.mcp.naming import safe_names

__all__ = ["CallTool", "ServerTools"]

_log = logging.getLogger("tackroom.workers.mcp")

CallTool = Callable[[str, dict[str, Any]], Awaitable[ToolCallResult]]
"""Calls a tool by its name on the server with the model's arguments."""


@dataclass(frozen=True, slots=True)
class _Entry:
    registration: Registration
    fingerprint: str


class ServerTools:
    def __init__(
        self, ctx: WorkerContext[Any], server: str, config: ServerConfig, call: CallTool
    ) -> None:
        self._ctx = ctx
        self._server = server
        self._config = config
        self._call = call
        self._registered: dict[str, _Entry] = {}
        self.hidden: list[str] = []

    @property
    def function_ids(self) -> list[str]:
        return sorted(self._registered)

    async def sync(self, tools: list[types.Tool]) -> None:
        """Make the registered functions match ``tools`` (the server's whole listing)."""
        shown = [tool for tool in tools if self._config.exposes(tool.name)]
        self.hidden = sorted(tool.name for tool in tools if not self._config.exposes(tool.name))
        names = safe_names(tool.name for tool in shown)
        wanted = {tool_function_id(self._server, names[tool.name]): tool for tool in shown}
        for function_id in sorted(set(self._registered) - set(wanted)):
            await self._registered.pop(function_id).registration.unregister()
            _log.info("mcp %s: tool %s is gone; unregistered", self._server, function_id)
        for function_id, tool in sorted(wanted.items()):
            await self._register(function_id, tool)

    async def unregister_all(self) -> None:
        while self._registered:
            _, entry = self._registered.popitem()
            await entry.registration.unregister()

    async def _register(self, function_id: str, tool: types.Tool) -> None:
        traits = tool_traits(tool, self._config)
        schema = tool_schema(tool, traits)
        description = describe_tool(self._server, tool)
        fingerprint = json.dumps([schema, description], sort_keys=True, default=str)
        known = self._registered.get(function_id)
        if known is not None:
            if known.fingerprint == fingerprint:
                return
            await known.registration.unregister()
        registration = await self._ctx.register_function(
            function_id,
            self._handler(tool.name),
            description=description,
            request_schema=schema,
            response_schema=LazySchema(ToolCallResult.model_json_schema),
        )
        self._registered[function_id] = _Entry(registration, fingerprint)

    def _handler(self, name: str) -> Callable[[Any], Awaitable[Any]]:
        call = self._call

        async def handle(payload: Any) -> Any:
            if payload is not None and not isinstance(payload, dict):
                raise FunctionError(
                    "invalid_request", f"the arguments of {name!r} must be a JSON object"
                )
            # The call context is not the server's business (and not validated here: the bridge
            # does not use it).
            arguments = {k: v for k, v in (payload or {}).items() if k != CALL_CONTEXT_KEY}
            return dump(await call(name, arguments))

        return handle
