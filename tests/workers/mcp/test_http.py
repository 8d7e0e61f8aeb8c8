"""The bridge over streamable HTTP: server-everything (npm) as its own process on a free port."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tackroom.contracts.mcp import CALL_INTERRUPTED, SERVER_UNAVAILABLE
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import Host
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.engines import MEMORY_URL
from tackroom.testing.waiting import wait_until
from tackroom.workers.mcp.worker import WORKER

from .servers import CALL, HttpServer, needs_node_servers

pytestmark = needs_node_servers


@pytest.fixture
async def engine(http_everything: HttpServer) -> AsyncIterator[Engine]:
    config = HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "worker_config": {
                "mcp": {
                    "servers": {"web": {"url": http_everything.url, "deny_tools": ["get-env"]}},
                    "backoff_initial": 0.2,
                    "wait_for_connection": 1.0,
                }
            },
        }
    )
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=config) as host:
        yield host.engine


async def echo(engine: Engine, text: str) -> str:
    result = await engine.trigger("mcp::web::echo", {"message": text, **CALL})
    return str(result["content"][0]["text"])


async def connected(engine: Engine) -> bool:
    (status,) = (await engine.trigger("mcp::servers", {}))["servers"]
    return bool(status["state"] == "connected")


async def test_tools_over_http_and_a_server_restarted_under_the_bridge(
    engine: Engine, http_everything: HttpServer
) -> None:
    (status,) = (await engine.trigger("mcp::servers", {}))["servers"]
    assert (status["transport"], status["state"]) == ("http", "connected")
    assert "mcp::web::get-env" not in status["tools"]
    assert await echo(engine, "hi") == "Echo: hi"

    # killed mid-call: interrupted (once the SDK's SSE reconnection gives up, ~2 s); had the
    # request not left yet, the server was unreachable instead
    call = asyncio.create_task(
        engine.trigger(
            "mcp::web::trigger-long-running-operation", {"duration": 30, "steps": 30, **CALL}
        )
    )
    await asyncio.sleep(0.2)  # most likely running by now; either code is right if not
    await http_everything.kill()
    with pytest.raises(InvocationError) as caught:
        await call
    assert caught.value.remote_code in (CALL_INTERRUPTED, SERVER_UNAVAILABLE)

    # a new server on the same port knows nothing of the old session: the bridge starts a new one
    await http_everything.start()

    async def answers() -> bool:
        try:
            return await echo(engine, "again") == "Echo: again"
        except InvocationError as exc:
            if exc.remote_code not in (CALL_INTERRUPTED, SERVER_UNAVAILABLE):
                raise
            return False

    await wait_until(answers, timeout=20, interval=0.2, message="a call after the restart")
    assert await connected(engine)

    # gone while idle: the next call cannot reach it, and says so (nothing ran: try again)
    await http_everything.kill()
    with pytest.raises(InvocationError) as refused:
        await echo(engine, "anyone?")
    assert refused.value.remote_code == SERVER_UNAVAILABLE
