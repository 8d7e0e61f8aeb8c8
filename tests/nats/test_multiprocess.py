"""Several real processes on one NATS server: functions, triggers, queues across processes."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest

from tackroom.engine import Engine, FunctionNotFound, StreamRecord
from tackroom.testing import running_engine, wait_until

from .child import HOLD, MP_QUEUE, QUEUE
from .conftest import SpawnChild


async def test_a_function_served_in_one_process_is_triggered_from_another(
    nats_url: str, spawn_child: SpawnChild
) -> None:
    child = await spawn_child("serve", nats_url)
    async with running_engine(nats_url) as engine:
        answer = await engine.trigger("mp::echo", {"n": 1}, timeout=10)
        assert answer == {"pid": child.pid, "payload": {"n": 1}}

        infos = [f for f in await engine.list_functions() if f.function_id == "mp::echo"]
        assert [(f.worker, f.description) for f in infos] == [("child", "Echo with pid")]
        workers = [w for w in await engine.list_workers() if w.name == "child"]
        assert [(w.pid, sorted(w.functions)) for w in workers] == [
            (child.pid, ["mp::echo", "mp::slow"])
        ]

        os.kill(child.pid, signal.SIGKILL)
        await child.process.wait()
        with pytest.raises(FunctionNotFound) as caught:
            await engine.trigger("mp::echo", {}, timeout=5)
        assert caught.value.function_id == "mp::echo"

        # The dead worker's catalog entry expires after three missed heartbeats (0.5 s here).
        await wait_until(lambda: _lacks(engine, "mp::echo"), timeout=10)


async def _lacks(engine: Engine, function_id: str) -> bool:
    return all(f.function_id != function_id for f in await engine.list_functions())


async def test_calls_spread_across_replica_processes(
    nats_url: str, spawn_child: SpawnChild
) -> None:
    first = await spawn_child("serve", nats_url)
    second = await spawn_child("serve", nats_url)
    async with running_engine(nats_url) as engine:
        pids = {(await engine.trigger("mp::echo", i, timeout=10))["pid"] for i in range(60)}
    assert pids == {first.pid, second.pid}


async def test_a_state_trigger_held_by_two_replicas_fires_once_per_write(
    nats_url: str, spawn_child: SpawnChild
) -> None:
    replicas = [await spawn_child("trigger", nats_url) for _ in range(2)]
    async with running_engine(nats_url) as engine:
        keys = [f"order-{i}" for i in range(20)]
        for key in keys:
            await engine.set_state("orders", key, {"total": 1})

        async def seen() -> list[StreamRecord]:
            return await engine.read("seen", "orders")

        await wait_until(lambda: _count_at_least(seen, len(keys)), timeout=20)
        await asyncio.sleep(0.5)  # not a race: gives a duplicate delivery time to show up
        records = await seen()
    assert sorted(r.data["key"] for r in records) == sorted(keys)
    assert {r.data["pid"] for r in records} <= {child.pid for child in replicas}


async def _count_at_least(read: Any, count: int) -> bool:
    return len(await read()) >= count


async def test_a_replica_killed_mid_handler_loses_its_message_to_the_other(
    nats_url: str, spawn_child: SpawnChild
) -> None:
    replicas = [await spawn_child("worker", nats_url) for _ in range(2)]
    async with running_engine(nats_url) as engine:
        await engine.configure_queue(QUEUE, MP_QUEUE)
        message_id = await engine.enqueue("mp::job", {"job": 1}, queue=QUEUE)

        await wait_until(lambda: any(c.printed(HOLD) for c in replicas), timeout=20)
        [holder] = [c for c in replicas if c.printed(HOLD)]
        [survivor] = [c for c in replicas if c is not holder]
        assert holder.printed(HOLD) == [f"{HOLD} {message_id}"]
        os.kill(holder.pid, signal.SIGKILL)
        await holder.process.wait()

        # Redelivered once the killed replica's lease (2 s) runs out, to the survivor.
        await wait_until(lambda: engine.get_state("done", "1"), timeout=20)
        done = await engine.get_state("done", "1")
    assert done is not None
    assert done.value == {"pid": survivor.pid, "attempt": 2, "id": message_id}
