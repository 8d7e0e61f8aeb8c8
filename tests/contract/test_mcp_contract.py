"""The MCP bridge contract suite against the ``mcp`` worker this package ships, bridging
``mcp-server-time`` (PyPI, in ``[dev]``) over stdio."""

from __future__ import annotations

import sys
from typing import Any

from tackroom.testing.contracts.mcp import McpContract


class TestMcpWorker(McpContract):
    worker_name = "mcp"

    def bridge_config(self, server: str) -> dict[str, Any]:
        return {"servers": {server: {"command": [sys.executable, "-m", "mcp_server_time"]}}}
