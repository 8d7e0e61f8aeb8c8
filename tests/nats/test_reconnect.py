"""A NATS server restart in the middle of a run: workers ride through it.

The server is stopped (SIGTERM) and started again on the same port and store directory while a
worker process and this process stay up. In-flight calls fail with ``EngineUnavailable``; the
worker's registrations come back; no acknowledged queue message or state write is lost.
"""

from __future__ import annotations

import asyncio

import pytest

from tackroom.engine import Engine, EngineUnavailable, FunctionNotFound
from tackroom.testing import running_engine, wait_until
from tackroom.testing.nats import NatsServer

from .child import MP_QUEUE, QUEUE
from .conftest import SpawnChild


async def _answers(engine: Engine, child_pid: int) -> bool:
    try:
        answer = await engine.trigger("mp::echo", "ping", timeout=2)
    except (EngineUnavailable, FunctionNotFound, TimeoutError):
        return False
    return bool(answer["pid"] == child_pid)


async def _counted(engine: Engine, ids: set[str]) -> bool:
    try:
        seen = {entry.key for entry in await engine.list_state("count")}
    except EngineUnavailable:
        return False
    return ids <= seen


async def test_a_worker_rides_through_a_server_restart(
    own_server: NatsServer, spawn_child: SpawnChild
) -> None:
    url = f"{own_server.url}?namespace=restart&heartbeat=0.5"
    child = await spawn_child("counter", url)
    async with running_engine(url) as engine:
        await engine.configure_queue(QUEUE, MP_QUEUE)
        assert await _answers(engine, child.pid)
        before = await engine.set_state("kept", "k", {"v": 1})
        ids = {await engine.enqueue("mp::count", {"n": n}, queue=QUEUE) for n in range(20)}

        in_flight = asyncio.create_task(engine.trigger("mp::slow", {"seconds": 5}, timeout=30))
        await asyncio.sleep(0.3)  # not a race: the call is on its way when the server stops
        own_server.stop()
        with pytest.raises(EngineUnavailable):
            await asyncio.wait_for(in_flight, 10)
        own_server.start()

        # The worker's subscription and catalog entry come back; calls work again.
        await wait_until(lambda: _answers(engine, child.pid), timeout=30)
        await wait_until(
            lambda: _has_function(engine, "mp::count"), timeout=10, message="catalog entry"
        )
        ids |= {await engine.enqueue("mp::count", {"n": n}, queue=QUEUE) for n in range(20, 40)}

        await wait_until(lambda: _counted(engine, ids), timeout=30)
        kept = await engine.get_state("kept", "k")
    assert kept == before
    assert len(ids) == 40


async def _has_function(engine: Engine, function_id: str) -> bool:
    try:
        return any(f.function_id == function_id for f in await engine.list_functions())
    except EngineUnavailable:
        return False
