"""Real MCP servers for the bridge's tests.

- ``mcp-server-time`` (PyPI, in ``[dev]``) over stdio, with this interpreter;
- ``@modelcontextprotocol/server-everything`` and ``server-filesystem`` (npm, installed by
  ``make setup`` into ``tests/fixtures/mcp_servers/node_modules``) with the machine's node, over
  stdio, and server-everything over streamable HTTP too;
- ``tests/fixtures/mcp_servers/slow_server.py``: a small server of our own (a tool that sleeps,
  to kill the server under; a tool error; two names that sanitize alike).

The tests that need node skip, saying why, when node_modules is missing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tackroom.testing.waiting import wait_until

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mcp_servers"
NODE_BIN = FIXTURES / "node_modules" / ".bin"
EVERYTHING = NODE_BIN / "mcp-server-everything"
FILESYSTEM = NODE_BIN / "mcp-server-filesystem"
SLOW_SERVER = FIXTURES / "slow_server.py"

needs_node_servers = pytest.mark.skipif(
    not (EVERYTHING.exists() and FILESYSTEM.exists() and shutil.which("node")),
    reason="the npm MCP servers are not installed (make setup runs npm ci in "
    "tests/fixtures/mcp_servers) or node is missing",
)

CALL = {"_call": {"schema_version": 2, "session_id": "s1", "function_call_id": "c1"}}


def time_server() -> dict[str, Any]:
    return {"command": [sys.executable, "-m", "mcp_server_time"]}


def everything_server() -> dict[str, Any]:
    return {"command": [str(EVERYTHING), "stdio"]}


def filesystem_server(root: Path, **options: Any) -> dict[str, Any]:
    return {"command": [str(FILESYSTEM), str(root)], **options}


def slow_server(marker: Path, **options: Any) -> dict[str, Any]:
    return {
        "command": [sys.executable, str(SLOW_SERVER)],
        "env": {"SLOW_MARKER": str(marker)},
        **options,
    }


@dataclass
class HttpServer:
    """server-everything serving streamable HTTP on ``port``, restartable on the same port."""

    port: int
    process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            str(EVERYTHING),
            "streamableHttp",
            env={**os.environ, "PORT": str(self.port)},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await wait_until(self._listening, timeout=15, message="server-everything listening")

    async def _listening(self) -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return False
        writer.close()
        await writer.wait_closed()
        return True

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
