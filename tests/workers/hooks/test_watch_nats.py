"""``HookSubscriptions`` on a real NATS server: two engine connections (as two processes would
hold), each with its own map, both follow every subscription change."""

from __future__ import annotations

from pathlib import Path

from tackroom.engine import Engine, open_engine
from tackroom.hooks import HookSubscriptions
from tackroom.runtime import Host, WorkerConfig, WorkerContext, load_worker
from tackroom.testing import wait_until
from tackroom.testing.nats import nats_test_url


class _Config(WorkerConfig):
    pass


async def change(engine: Engine, verb: str, topic: str) -> None:
    request = {"topic": topic, "function_id": "x::hook"}
    await engine.trigger(f"hook-fanout::{verb}", request, timeout=5)


async def test_every_process_sees_every_change(tmp_path: Path) -> None:
    url = nats_test_url(tmp_path)
    async with Host(engine=open_engine(url), workers=[load_worker("hooks")]) as host:
        other = open_engine(url)
        await other.start()
        contexts = [
            WorkerContext(engine=engine, name="orchestrator", config=_Config())
            for engine in (host.engine, other)
        ]
        maps = [HookSubscriptions(ctx.engine) for ctx in contexts]
        try:
            for watched, ctx in zip(maps, contexts, strict=True):
                await watched.attach(ctx)
            topics = ["t0", "t1", "t2"]
            for topic in topics:
                await change(other, "subscribe", topic)
            await wait_until(lambda: all(m.has_subscribers(t) for m in maps for t in topics))
            await change(host.engine, "unsubscribe", "t1")
            await wait_until(lambda: not any(m.has_subscribers("t1") for m in maps))
            assert all(m.has_subscribers("t2") for m in maps)
        finally:
            for ctx in contexts:
                await ctx.close()
            await other.close()
