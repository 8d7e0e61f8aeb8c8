"""One configured MCP server: its connection, supervised, and the requests made over it.

:meth:`ServerLink.supervise` (a task the worker owns) connects, lists the server's tools,
resources and prompts, registers the tools, and waits until the connection ends — a stdio
server's stdout closing (it died), an HTTP transport failing — then reconnects with exponential
backoff (``backoff_initial`` doubling up to ``backoff_max``; the delay starts over after a
connection that lasted). Requests in flight when a connection ends fail with
``mcp_call_interrupted``; a request made while the server is down waits up to
``wait_for_connection`` for it, then fails with ``unavailable``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, REQUEST_TIMEOUT

from tackroom.contracts.mcp import (
    MCP_ERROR,
    SERVER_UNAVAILABLE,
    ServerState,
    ServerStatus,
    ToolCallResult,
)
from tackroom.engine.errors import FunctionError
from tackroom.runtime.worker import WorkerContext
from tackroom.workers.mcp.config import McpConfig, ServerConfig
from tackroom.workers.mcp.connection import Connection, backoff, first_of
from tackroom.workers.mcp.convert import tool_result
from tackroom.workers.mcp.errors import describe, interrupted, public_url, request_error
from tackroom.workers.mcp.listing import Listing, list_server
from tackroom.workers.mcp.secrets import resolve_all
from tackroom.workers.mcp.tools import ServerTools
from tackroom.workers.mcp.transport import (
    StderrPump,
    http_transport,
    nothing_sent,
    stdio_transport,
    stop_task,
    watched,
)

__all__ = ["ServerLink"]

_log = logging.getLogger("tackroom.workers.mcp")

T = TypeVar("T")

STABLE_AFTER = 10.0
"""Seconds a connection must last for the next reconnection to start at ``backoff_initial``."""

_SESSION_ERRORS = frozenset({INTERNAL_ERROR, INVALID_REQUEST})
"""Error codes the HTTP transport answers with when the server refused the request itself
(a 4xx/5xx status, a terminated session): worth checking that the session still lives."""

_CHANGED = (
    types.ToolListChangedNotification,
    types.ResourceListChangedNotification,
    types.PromptListChangedNotification,
)


@dataclass(slots=True)
class _Attempts:
    """Counts behind the backoff and the status."""

    connects: int = 0
    failures: int = 0
    streak: int = 0
    """Connections that failed or did not last, in a row: the backoff's exponent."""


class ServerLink:
    def __init__(self, ctx: WorkerContext[Any], name: str, config: ServerConfig) -> None:
        self.name = name
        self.config = config
        self._settings: McpConfig = ctx.config
        self._bus = ctx.engine
        self.tools = ServerTools(ctx, name, config, self.call_tool)
        self.state: ServerState = "connecting"
        self.last_error: str | None = None
        self.listing = Listing()
        self.attempts = _Attempts()
        self.started = asyncio.Event()
        """Set once the first attempt has connected or failed."""
        self._conn: Connection | None = None
        self._up = asyncio.Event()
        self._relist = asyncio.Event()
        self._secrets: list[str] = []
        self._info: types.Implementation | None = None
        self._protocol: str | None = None
        self._stderr_tail: str | None = None
        self._end_cause: str | None = None

    @property
    def where(self) -> str:
        if self.config.url is not None:
            return public_url(self.config.url)
        assert self.config.command is not None
        return self.config.command[0]

    # -- supervision -------------------------------------------------------------------------

    async def supervise(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                began, connects = loop.time(), self.attempts.connects
                self._stderr_tail = self._end_cause = None
                try:
                    await self._connect_and_serve()
                    cause = self._end_cause or "the server closed the connection"
                except Exception as exc:
                    cause = describe(exc, secrets=self._secrets)
                connected = self.attempts.connects > connects
                if not connected and self._stderr_tail:
                    cause = f"{cause} (its stderr: {self._stderr_tail})"
                delay = self._after_attempt(cause, connected=connected, lasted=loop.time() - began)
                await asyncio.sleep(delay)
        finally:
            self._set_down("stopped")
            self.started.set()
            await self.tools.unregister_all()

    def _after_attempt(self, cause: str, *, connected: bool, lasted: float) -> float:
        """Record how an attempt ended; log it; return the delay before the next one."""
        self._set_down("reconnecting")
        self.last_error = cause
        attempts = self.attempts
        attempts.streak = 1 if connected and lasted >= STABLE_AFTER else attempts.streak + 1
        if not connected:
            attempts.failures += 1
        delay = backoff(
            attempts.streak,
            initial=self._settings.backoff_initial,
            limit=self._settings.backoff_max,
        )
        if connected:
            _log.warning(
                "mcp: server %r (%s) disconnected: %s; reconnecting in %.1fs",
                self.name, self.where, cause, delay,
            )  # fmt: skip
        elif attempts.failures == 1:
            verb = "did not start" if attempts.connects == 0 else "could not reconnect"
            _log.warning(
                "mcp: server %r (%s) %s: %s; retrying in %.1fs, with backoff up to %gs",
                self.name, self.where, verb, cause, delay, self._settings.backoff_max,
            )  # fmt: skip
        else:
            _log.debug("mcp: server %r: attempt failed: %s", self.name, cause)
        self.started.set()
        return delay

    def _mark_ended(self, ended: asyncio.Event, *, cause: str | None = None) -> None:
        """A connection's end, seen by its transport or by a request: new requests wait for the
        next connection from now on."""
        if cause is not None and not ended.is_set():
            self._end_cause = cause
        ended.set()
        if self._conn is not None and self._conn.ended is ended:
            self._set_down("reconnecting")

    def _set_down(self, state: ServerState) -> None:
        self._up.clear()
        self._conn = None
        self.state = state

    async def _connect_and_serve(self) -> None:
        self.state = "connecting" if self.attempts.connects == 0 else "reconnecting"
        secrets = await resolve_all(self._bus, self.config.secrets())
        self._secrets = list(secrets.values())
        ended = asyncio.Event()
        pump = None
        if self.config.command is not None:
            pump = StderrPump(
                self.name, max_lines=self._settings.stderr_lines, secrets=self._secrets
            )
            transport = stdio_transport(self.config, {k: secrets[k] for k in self.config.env}, pump)
        else:
            assert self.config.url is not None
            headers = {k: secrets[k] for k in self.config.headers}
            transport = http_transport(self.config.url, headers)
        pump_task = asyncio.create_task(pump.pump()) if pump is not None else None
        on_end = functools.partial(self._mark_ended, ended)
        client = Client(watched(transport, on_end), cache=None, message_handler=self._on_message)
        connection = Connection(client, ended)
        try:
            await self._run(connection, pump)
        except Exception as exc:
            connection.refused = nothing_sent(exc)
            raise
        finally:
            connection.closed.set()
            await stop_task(pump_task)
            if pump is not None:
                pump.close()
                self._stderr_tail = pump.tail[-1] if pump.tail else None

    async def _run(self, connection: Connection, pump: StderrPump | None) -> None:
        client = connection.client
        with anyio.fail_after(self.config.connect_timeout) as deadline:
            async with client:
                if pump is not None:
                    pump.child_started()
                await self._refresh(client)
                deadline.deadline = math.inf
                self._set_up(client, connection)
                try:
                    await self._serve(client, connection)
                finally:
                    self._set_down("reconnecting")

    def _set_up(self, client: Client, connection: Connection) -> None:
        self._info = client.server_info
        self._protocol = client.protocol_version
        self.attempts.connects += 1
        self.attempts.failures = 0
        self.last_error = None
        self._conn = connection
        self.state = "connected"
        self._up.set()
        self.started.set()
        again = "re" if self.attempts.connects > 1 else ""
        _log.info(
            "mcp: server %r %sconnected: %d tools registered",
            self.name, again, len(self.tools.function_ids),
        )  # fmt: skip

    async def _refresh(self, client: Client) -> None:
        self.listing = await list_server(client, server=self.name)
        await self.tools.sync(self.listing.tools)

    async def _serve(self, client: Client, connection: Connection) -> None:
        """Wait until the connection ends; re-list when the server says its lists changed."""
        while not connection.ended.is_set():
            await first_of(connection.ended, self._relist)
            if self._relist.is_set() and not connection.ended.is_set():
                self._relist.clear()
                try:
                    with anyio.fail_after(self.config.connect_timeout):
                        await self._refresh(client)
                except Exception as exc:
                    why = describe(exc, secrets=self._secrets)
                    _log.warning("mcp: server %r: re-listing failed: %s", self.name, why)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, _CHANGED):
            self._relist.set()
        elif isinstance(message, Exception):
            _log.debug("mcp %s: transport: %s", self.name, describe(message, secrets=self._secrets))

    # -- requests ----------------------------------------------------------------------------

    async def _connection(self, *, wait: bool) -> Connection:
        connection = self._conn
        if connection is not None and connection.ended.is_set():
            self._mark_ended(connection.ended)
            connection = None
        if connection is None and wait and self.state != "stopped":
            try:
                async with asyncio.timeout(self._settings.wait_for_connection):
                    await self._up.wait()
            except TimeoutError:
                pass
            connection = self._conn
        if connection is None:
            because = f" ({self.last_error})" if self.last_error else ""
            raise FunctionError(
                SERVER_UNAVAILABLE,
                f"MCP server {self.name!r} is not connected: {self.state}{because}; the bridge "
                "retries with backoff, try again later",
            )
        return connection

    @property
    def connected(self) -> bool:
        return self._conn is not None

    async def request(
        self, what: str, operation: Callable[[Client], Awaitable[T]], *, wait: bool = True
    ) -> T:
        """``operation`` on the connected client (within the server's ``timeout``, and a little
        more: a tool call's own timeout comes first), its failures as typed errors."""
        connection = await self._connection(wait=wait)
        try:
            with anyio.fail_after(self.config.timeout + 1.0):
                return await operation(connection.client)
        except FunctionError:
            raise
        except MCPError as exc:
            raise await self._request_failed(connection, what, exc) from None
        except TimeoutError:
            raise request_error(
                self.name, what, MCPError(REQUEST_TIMEOUT, "timed out"), timeout=self.config.timeout
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._mark_ended(connection.ended)
            raise interrupted(self.name, what) from None
        except Exception as exc:
            problem = describe(exc, secrets=self._secrets)
            raise FunctionError(
                MCP_ERROR, f"MCP server {self.name!r} failed {what}: {problem}"
            ) from None

    async def _request_failed(
        self, connection: Connection, what: str, exc: MCPError
    ) -> FunctionError:
        if exc.code == CONNECTION_CLOSED or connection.ended.is_set():
            self._mark_ended(connection.ended)
            if await connection.refused_at_close():
                return FunctionError(
                    SERVER_UNAVAILABLE,
                    f"MCP server {self.name!r} cannot be reached, so {what} did not run; the "
                    "bridge is reconnecting, try again",
                )
            return interrupted(self.name, what)
        probe = min(self.config.connect_timeout, 5.0)
        if exc.code in _SESSION_ERRORS and not await connection.alive(timeout=probe):
            self._mark_ended(connection.ended, cause=f"the session was lost ({exc.message})")
            return FunctionError(
                SERVER_UNAVAILABLE,
                f"MCP server {self.name!r} lost the session ({exc.message}) before {what} ran; "
                "the bridge is reconnecting, try again",
            )
        return request_error(self.name, what, exc, timeout=self.config.timeout)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolCallResult:
        timeout = self.config.timeout

        async def call(client: Client) -> types.CallToolResult:
            return await client.call_tool(name, arguments, read_timeout_seconds=timeout)

        return tool_result(self.name, name, await self.request(f"the tool {name!r}", call))

    def status(self) -> ServerStatus:
        info = self._info
        return ServerStatus(
            name=self.name,
            transport="stdio" if self.config.command is not None else "http",
            state=self.state,
            server_name=info.name if info else None,
            server_version=info.version if info else None,
            protocol_version=self._protocol,
            tools=self.tools.function_ids,
            hidden_tools=self.tools.hidden,
            resources=self.listing.resources,
            resource_templates=self.listing.templates,
            prompts=self.listing.prompts,
            connects=self.attempts.connects,
            failures=self.attempts.failures,
            last_error=self.last_error,
        )
