"""MCP bridge benchmark: a tool call through the bus and the ``mcp`` worker vs the SDK directly.

    python bench/mcp_bridge.py [--samples N]

One JSON document: p50/p99 in milliseconds per figure, the overhead, and the machine.

For each real server — ``mcp-server-time`` (PyPI, Python, ``get_current_time``) and, when
``make setup`` has installed it, ``server-everything`` (npm, node, ``echo``), both over stdio:

- ``bridge_call``: ``engine.trigger("mcp::<server>::<tool>", arguments)`` on an in-memory engine
  hosting the ``mcp`` worker (the bus round trip, the call context split off, the SDK call, the
  result converted to content blocks and dumped);
- ``direct_sdk_call``: ``Client.call_tool`` on a ``mcp.Client`` of our own, connected to a second
  process of the same server the same way (stdio, no response cache);
- ``overhead_ms``: ``bridge_call`` p50 - ``direct_sdk_call`` p50 (target: at most 1 ms).

Samples interleave the two. The machine is shared and noisy: quote figures from one run, with its
``loadavg_1m``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine, summarize_ms, timed
from mcp import Client, StdioServerParameters

from tackroom.engine import open_engine
from tackroom.runtime import Host
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.mcp.worker import WORKER

SCHEMA_VERSION = 1
TARGET_OVERHEAD_MS = 1.0
NODE_BIN = Path(__file__).resolve().parents[1] / "tests/fixtures/mcp_servers/node_modules/.bin"


def servers() -> dict[str, tuple[list[str], str, dict[str, Any]]]:
    """name → (command, tool, arguments)."""
    found = {
        "time": (
            [sys.executable, "-m", "mcp_server_time"],
            "get_current_time",
            {"timezone": "UTC"},
        )
    }
    everything = NODE_BIN / "mcp-server-everything"
    if everything.exists():
        found["everything"] = ([str(everything), "stdio"], "echo", {"message": "hello"})
    return found


async def measure(
    host: Host, name: str, command: list[str], tool: str, arguments: dict[str, Any], samples: int
) -> dict[str, Any]:
    program, *args = command
    payload = {**arguments, "_call": {"session_id": "bench", "function_call_id": "c"}}
    async with Client(StdioServerParameters(command=program, args=args), cache=None) as client:

        async def bridge() -> None:
            reply = await host.engine.trigger(f"mcp::{name}::{tool}", payload)
            assert not reply["is_error"], reply

        async def direct() -> None:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result

        calls = {"bridge_call": bridge, "direct_sdk_call": direct}
        figures: dict[str, list[float]] = {key: [] for key in calls}
        for _ in range(max(10, samples // 10)):  # warm-up
            for call in calls.values():
                await call()
        for _ in range(samples):
            for key, call in calls.items():
                figures[key].append(await timed(call))
    report: dict[str, Any] = {key: summarize_ms(values) for key, values in figures.items()}
    overhead = report["bridge_call"]["p50_ms"] - report["direct_sdk_call"]["p50_ms"]
    report["tool"] = tool
    report["overhead_ms"] = round(overhead, 3)
    report["pass"] = overhead <= TARGET_OVERHEAD_MS
    return report


async def run(samples: int) -> dict[str, Any]:
    chosen = servers()
    section = {name: {"command": command} for name, (command, _, _) in chosen.items()}
    config = HarnessConfig.model_validate(
        {"schema_version": 1, "worker_config": {"mcp": {"servers": section}}}
    )
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=config) as host:
        return {
            name: await measure(host, name, command, tool, arguments, samples)
            for name, (command, tool, arguments) in chosen.items()
        }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    before = machine()
    figures = await run(args.samples)
    report = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "mcp",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "target_overhead_ms": TARGET_OVERHEAD_MS,
        "machine": before,
        "loadavg_1m_after": machine()["loadavg_1m"],
        "figures": figures,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
