"""The ``mcp`` bridge against real servers over stdio: one bridge for the module.

mcp-server-time (PyPI), server-everything and server-filesystem (npm, with node), and the small
``slow_server.py``: tools as functions with their schemas and traits, results, tool errors,
resources, prompts, status, a server that cannot start, a timeout, and a server killed mid-call.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tackroom.contracts.mcp import CALL_INTERRUPTED, SERVER_UNAVAILABLE
from tackroom.contracts.tools import traits_of
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import Host
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.engines import MEMORY_URL
from tackroom.testing.waiting import wait_until
from tackroom.workers.mcp.worker import WORKER

from .servers import (
    CALL,
    everything_server,
    filesystem_server,
    needs_node_servers,
    slow_server,
    time_server,
)

pytestmark = [needs_node_servers, pytest.mark.asyncio(loop_scope="module")]


@dataclass
class Bridge:
    engine: Engine
    root: Path
    marker: Path

    async def call(self, function_id: str, arguments: dict[str, Any] | None = None) -> Any:
        return await self.engine.trigger(function_id, {**(arguments or {}), **CALL})

    async def fails(self, function_id: str, arguments: dict[str, Any], code: str) -> str:
        with pytest.raises(InvocationError) as caught:
            await self.call(function_id, arguments)
        assert caught.value.remote_code == code, caught.value
        return caught.value.message

    async def status(self, name: str) -> dict[str, Any]:
        servers = (await self.engine.trigger("mcp::servers", {}))["servers"]
        return next(server for server in servers if server["name"] == name)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bridge(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Bridge]:
    root = tmp_path_factory.mktemp("fs-root")
    (root / "notes.txt").write_text("buy milk\n")
    marker = tmp_path_factory.mktemp("slow") / "pid"
    servers = {
        "time": {**time_server(), "read_only_tools": ["get_*"]},
        "every": {**everything_server(), "trust_read_only_hints": True},
        "fs": filesystem_server(root, deny_tools=["move_file", "edit_*"]),
        "slow": slow_server(marker),
        "hasty": slow_server(root / "hasty-pid", timeout=0.5),
        "broken": {"command": [str(root / "no-such-server")]},
    }
    config = HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "worker_config": {"mcp": {"servers": servers, "wait_for_connection": 1.0}},
        }
    )
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=config) as host:
        yield Bridge(host.engine, root, marker)


async def test_each_allowed_tool_is_a_function_with_its_schema_and_traits(bridge: Bridge) -> None:
    catalog = {info.function_id: info for info in await bridge.engine.list_functions()}
    time_tool = catalog["mcp::time::get_current_time"]
    assert time_tool.worker == "mcp"
    assert "timezone" in (time_tool.request_schema or {})["properties"]
    read_only = traits_of(time_tool.request_schema)  # read_only_tools: [get_*]
    assert (read_only.read_only, read_only.idempotent, read_only.parallel) == (True, True, True)
    assert read_only.timeout == 62.0  # the server's timeout (60) and a margin
    # readOnlyHint and idempotentHint, but the server's own word for read-only is not enough
    convert = traits_of(catalog["mcp::time::convert_time"].request_schema)
    assert (convert.read_only, convert.idempotent, convert.parallel) == (False, True, False)
    trusted = traits_of(catalog["mcp::every::get-sum"].request_schema)  # trust_read_only_hints
    assert (trusted.read_only, trusted.parallel) == (True, True)

    write = traits_of(catalog["mcp::fs::write_file"].request_schema)  # idempotentHint only
    assert (write.read_only, write.idempotent, write.parallel) == (False, True, False)
    unmarked = traits_of(catalog["mcp::slow::write_note"].request_schema)  # no annotations
    assert (unmarked.read_only, unmarked.idempotent, unmarked.parallel) == (False, False, False)

    assert "mcp::fs::read_text_file" in catalog
    assert "mcp::fs::move_file" not in catalog  # deny_tools
    assert "mcp::fs::edit_file" not in catalog
    assert "mcp::every::get-sum" in catalog
    # "notes_count" keeps its name; "notes.count" is sanitized and gets a suffix
    assert {"mcp::slow::notes_count", "mcp::slow::notes_count_2"} <= set(catalog)
    for function_id in ("mcp::servers", "mcp::resources::list", "mcp::prompts::get"):
        assert catalog[function_id].worker == "mcp"


async def test_calls_reach_each_server(bridge: Bridge) -> None:
    now = await bridge.call("mcp::time::get_current_time", {"timezone": "Europe/Paris"})
    assert now["is_error"] is False
    assert now["details"]["structured"]["timezone"] == "Europe/Paris"
    assert '"timezone": "Europe/Paris"' in now["content"][0]["text"]

    total = await bridge.call("mcp::every::get-sum", {"a": 2, "b": 3})
    assert total["content"] == [{"type": "text", "text": "The sum of 2 and 3 is 5."}]

    image = await bridge.call("mcp::every::get-tiny-image")
    assert [block["type"] for block in image["content"]] == ["text", "image", "text"]
    assert image["content"][1]["mime"] == "image/png"

    path = str(bridge.root / "out.txt")
    await bridge.call("mcp::fs::write_file", {"path": path, "content": "hello"})
    assert (bridge.root / "out.txt").read_text() == "hello"
    read = await bridge.call("mcp::fs::read_text_file", {"path": str(bridge.root / "notes.txt")})
    assert read["content"][0]["text"] == "buy milk\n"

    assert (await bridge.call("mcp::slow::notes_count"))["content"][0]["text"] == "3"
    assert (await bridge.call("mcp::slow::notes_count_2"))["content"][0]["text"] == "4"


async def test_a_tool_error_is_a_result_marked_as_error(bridge: Bridge) -> None:
    result = await bridge.call("mcp::slow::fail", {"message": "the disk is on fire"})
    assert result["is_error"] is True
    assert "the disk is on fire" in result["content"][0]["text"]

    outside = await bridge.call("mcp::fs::read_text_file", {"path": "/etc/hostname"})
    assert outside["is_error"] is True  # server-filesystem refuses paths outside its root
    assert "outside allowed directories" in outside["content"][0]["text"]


async def test_arguments_that_are_not_an_object_are_refused(bridge: Bridge) -> None:
    with pytest.raises(InvocationError) as caught:
        await bridge.engine.trigger("mcp::every::get-sum", [1, 2])
    assert caught.value.remote_code == "invalid_request"


async def test_resources_and_prompts(bridge: Bridge) -> None:
    listed = await bridge.call("mcp::resources::list")
    uris = [item["uri"] for item in listed["resources"] if item["server"] == "every"]
    assert "demo://resource/static/document/architecture.md" in uris
    assert listed["templates"]
    assert listed["unavailable"] == ["broken"]

    read = await bridge.call(
        "mcp::resources::read",
        {"server": "every", "uri": "demo://resource/static/document/architecture.md"},
    )
    assert read["contents"][0]["text"].startswith("# Everything Server")
    assert read["_label"]["source"] == "untrusted"  # the server is not configured trusted
    assert read["_label"]["origins"] == ["mcp::resources::read", "mcp:every"]

    prompts = await bridge.call("mcp::prompts::list", {"server": "every"})
    assert "args-prompt" in [prompt["name"] for prompt in prompts["prompts"]]
    prompt = await bridge.call(
        "mcp::prompts::get",
        {"server": "every", "name": "args-prompt", "arguments": {"city": "Oslo"}},
    )
    assert "Oslo" in prompt["messages"][0]["content"]["text"]

    await bridge.fails("mcp::resources::list", {"server": "fs"}, "not_supported")
    message = await bridge.fails("mcp::prompts::list", {"server": "nope"}, "unknown_server")
    assert "configured: broken, every, fs, hasty, slow, time" in message


async def test_status_and_a_server_that_cannot_start(bridge: Bridge) -> None:
    time_status = await bridge.status("time")
    assert time_status["state"] == "connected"
    assert time_status["server_name"] == "mcp-time"
    assert time_status["tools"] == ["mcp::time::convert_time", "mcp::time::get_current_time"]
    assert "move_file" in (await bridge.status("fs"))["hidden_tools"]
    assert (await bridge.status("every"))["prompts"] >= 4

    broken = await bridge.status("broken")
    assert broken["state"] in ("connecting", "reconnecting")
    assert broken["failures"] >= 1
    assert "no such file or directory" in broken["last_error"]
    assert broken["tools"] == []


async def test_a_call_over_the_server_timeout_fails_with_timeout(bridge: Bridge) -> None:
    message = await bridge.fails("mcp::hasty::sleep", {"seconds": 60}, "timeout")
    assert "within 0.5s" in message
    # the server is still there for the next call
    assert (await bridge.call("mcp::hasty::notes_count"))["content"][0]["text"] == "3"


async def test_a_server_killed_mid_call_fails_the_call_then_reconnects(bridge: Bridge) -> None:
    first = await bridge.status("slow")
    call = asyncio.create_task(bridge.call("mcp::slow::sleep", {"seconds": 60}))
    await wait_until(bridge.marker.exists, message="the sleep call reached the server")
    os.kill(int(bridge.marker.read_text()), signal.SIGKILL)

    with pytest.raises(InvocationError) as caught:
        await call
    assert caught.value.remote_code == CALL_INTERRUPTED
    assert "may or may not have had its effect" in caught.value.message

    async def reconnected() -> bool:
        return bool((await bridge.status("slow"))["state"] == "connected")

    await wait_until(reconnected, timeout=20, message="the bridge reconnected to 'slow'")
    assert (await bridge.call("mcp::slow::notes_count"))["content"][0]["text"] == "3"
    after = await bridge.status("slow")
    assert after["connects"] == first["connects"] + 1
    assert after["tools"] == first["tools"]


async def test_a_server_that_stays_down_is_unavailable(bridge: Bridge) -> None:
    """``broken`` never connects: a request to it waits ``wait_for_connection`` (1 s here), then
    fails with the transient code, naming the cause."""
    message = await bridge.fails(
        "mcp::resources::read", {"server": "broken", "uri": "x://y"}, SERVER_UNAVAILABLE
    )
    assert "MCP server 'broken' is not connected" in message
    assert "no such file or directory" in message
