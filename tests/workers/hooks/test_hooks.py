"""The hooks worker beyond its contract: the publisher's map, the user helper, races, gates."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tackroom.contracts.hooks import PublishRequest, Subscriber
from tackroom.engine import Engine, FunctionError, RevisionConflict
from tackroom.hooks import HookSubscriptions, block, hook, hook_worker, on, replace
from tackroom.runtime import Host, WorkerConfig, WorkerContext, load_worker
from tackroom.testing import memory_engine, wait_until
from tackroom.workers.hooks.fanout import publish
from tackroom.workers.hooks.subscriptions import SubscriptionStore
from tests.workers.sessions.fakes import WrappedBackend

SCOPE = "hook-subscriptions"


class _Config(WorkerConfig):
    pass


@pytest.fixture
async def bus() -> AsyncIterator[Engine]:
    async with memory_engine() as engine, Host(engine=engine, workers=[load_worker("hooks")]):
        yield engine


def context(engine: Engine, name: str) -> WorkerContext[_Config]:
    return WorkerContext(engine=engine, name=name, config=_Config())


async def subscribe(engine: Engine, topic: str, function_id: str) -> None:
    request = {"topic": topic, "function_id": function_id}
    await engine.trigger("hook-fanout::subscribe", request, timeout=5)


# -- HookSubscriptions -------------------------------------------------------------------------


async def test_the_map_loads_and_follows_subscriptions(bus: Engine) -> None:
    await subscribe(bus, "turn_end", "o::early")
    ctx = context(bus, "orchestrator")
    watched = HookSubscriptions(bus)
    try:
        fid = await watched.attach(ctx)
        assert fid.startswith("hook-fanout::watch::orchestrator::")
        assert watched.has_subscribers("turn_end")  # loaded at attach
        assert not watched.has_subscribers("after_function_call")

        await subscribe(bus, "after_function_call", "t::redact")
        await wait_until(lambda: watched.has_subscribers("after_function_call"))
        request = {"topic": "after_function_call", "function_id": "t::redact"}
        await bus.trigger("hook-fanout::unsubscribe", request, timeout=5)
        await wait_until(lambda: not watched.has_subscribers("after_function_call"))
        assert watched.subscriber_count("turn_end") == 1
    finally:
        await ctx.close()


async def test_two_replicas_each_see_every_change(bus: Engine) -> None:
    one, two = context(bus, "orchestrator"), context(bus, "orchestrator")
    first, second = HookSubscriptions(bus), HookSubscriptions(bus)
    try:
        await first.attach(one)
        await second.attach(two)
        await subscribe(bus, "turn_end", "o::x")
        await wait_until(lambda: first.has_subscribers("turn_end"))
        await wait_until(lambda: second.has_subscribers("turn_end"))
    finally:
        await one.close()
        await two.close()


async def test_a_stale_write_never_overrides_a_newer_load() -> None:
    async with memory_engine() as engine:
        watched = HookSubscriptions(engine)
        one = {"schema_version": 1, "subscribers": [{"function_id": "a", "priority": 0}]}
        await engine.set_state(SCOPE, "t", {"schema_version": 1, "subscribers": []})
        newer = await engine.set_state(SCOPE, "t", one)
        await watched.load()
        event = {"scope": SCOPE, "key": "t", "event": "set", "new_value": {"subscribers": []}}
        await watched.on_change({**event, "revision": newer.revision - 1})
        assert watched.has_subscribers("t")
        await watched.on_change({**event, "event": "delete", "new_value": None, "revision": 0})
        assert not watched.has_subscribers("t")
        odd = {**event, "new_value": {"schema_version": 9, "who": "?"}, "revision": newer.revision}
        await watched.on_change(odd)
        assert watched.has_subscribers("t")  # unreadable: assume someone listens


async def test_publish_skips_a_topic_nobody_listens_to(bus: Engine) -> None:
    calls: list[Any] = []

    async def counting(payload: Any) -> Any:
        calls.append(payload)
        return await bus.trigger("hook-fanout::publish_collect", payload, timeout=5)

    await bus.register_function("test::publish", counting, worker="test")
    watched = HookSubscriptions(bus, publish_function="test::publish")
    await watched.load()
    assert await watched.publish("after_function_call", {"result": 1}) is None
    assert calls == []  # no round trip at all

    async def gate(event: Any) -> Any:
        return block("no")

    await bus.register_function("g::no", gate, worker="test")
    await subscribe(bus, "before_function_call", "g::no")
    await watched.load()
    result = await watched.publish("before_function_call", {"function_id": "x"})
    assert result is not None
    assert (result.blocked, result.blocked_by, len(calls)) == (True, "g::no", 1)


async def test_publish_fails_closed_when_the_hooks_worker_fails(bus: Engine) -> None:
    async def broken(payload: Any) -> Any:
        raise FunctionError("down", "hooks are down")

    await bus.register_function("test::broken", broken, worker="test")
    for topic in ("before_function_call", "after_function_call", "turn_end"):
        await subscribe(bus, topic, "x::y")
    watched = HookSubscriptions(bus, publish_function="test::broken")
    await watched.load()
    gate = await watched.publish("before_function_call", {"args": 1})
    assert gate is not None
    assert (gate.blocked, gate.blocked_by, gate.payload) == (True, "test::broken", {"args": 1})
    transform = await watched.publish("after_function_call", {"secret": 1})
    assert transform is not None
    assert (transform.blocked, transform.payload) == (True, None)
    observed = await watched.publish("turn_end", {})
    assert observed is not None
    assert (observed.blocked, observed.errors) == (False, 1)


# -- the user helper ---------------------------------------------------------------------------


async def test_hook_worker_redacts_and_leaves_cleanly(bus: Engine) -> None:
    async def redact(result: Any) -> Any:
        return replace({"text": result["text"].replace("hunter2", "***")})

    @on("before_function_call", priority=-3, name="no_shell")
    async def gate(call: Any) -> Any:
        return block("no shell") if call["function_id"] == "shell::run" else None

    spec = hook_worker("guard", gate, after_function_call=redact)
    ctx = WorkerContext(engine=bus, name="guard", config=spec.config_model())
    await spec.start(ctx)
    gated = await bus.get_state(SCOPE, "before_function_call")
    assert gated is not None
    assert gated.value["subscribers"] == [{"function_id": "hook::guard::no_shell", "priority": -3}]
    assert await gate({"function_id": "calc::add"}) is None  # still callable
    stored = await bus.get_state(SCOPE, "after_function_call")
    assert stored is not None
    assert stored.value["subscribers"] == [{"function_id": "hook::guard::redact", "priority": 0}]
    request = {
        "topic": "after_function_call",
        "payload": {"text": "pw is hunter2"},
        "merge_rule": "transform",
        "timeout_ms": 1000,
    }
    result = await bus.trigger("hook-fanout::publish_collect", request, timeout=5)
    assert result["payload"] == {"text": "pw is ***"}

    await ctx.close()
    assert await bus.list_state(SCOPE) == []
    assert "hook::guard::redact" not in {f.function_id for f in await bus.list_functions()}


async def test_a_hook_that_returns_a_bare_payload_blocks_loudly(bus: Engine) -> None:
    async def careless(result: Any) -> Any:
        return {"text": "redacted?"}  # should have been replace({...})

    ctx = context(bus, "careless")
    handle = await hook(ctx, "after_function_call", careless, name="redact")
    try:
        request = {"topic": "after_function_call", "payload": {"text": "x"},
                   "merge_rule": "transform", "timeout_ms": 1000}  # fmt: skip
        result = await bus.trigger("hook-fanout::publish_collect", request, timeout=5)
        assert result["blocked"] is True
        assert "replace(payload)" in result["reason"]
        assert handle.function_id == "hook::careless::redact"
    finally:
        await ctx.close()


# -- fan-out and subscriptions -----------------------------------------------------------------


async def test_a_gate_that_blocks_cancels_the_slower_ones() -> None:
    cancelled = asyncio.Event()

    async def trigger(function_id: str, payload: Any, timeout: float) -> Any:
        if function_id == "first":
            return block("stop")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    request = PublishRequest(topic="t", payload=1, merge_rule="first_block_wins", timeout_ms=60_000)
    subscribers = [Subscriber(function_id="first"), Subscriber(function_id="slow", priority=1)]
    result = await asyncio.wait_for(publish(trigger, request, subscribers), timeout=5)
    assert (result.blocked, result.blocked_by) == (True, "first")
    assert cancelled.is_set()


async def test_racing_subscriptions_all_land() -> None:
    async with memory_engine() as engine:
        backend = WrappedBackend(engine, interleave=True)
        conflicts = 0
        original = backend.set_state

        async def counting_set(*args: Any, **kwargs: Any) -> Any:
            nonlocal conflicts
            try:
                return await original(*args, **kwargs)
            except RevisionConflict:
                conflicts += 1
                raise

        backend.set_state = counting_set  # type: ignore[method-assign]
        store = SubscriptionStore(backend)
        ids = [f"h::{i:02}" for i in range(30)]
        await asyncio.gather(*(store.subscribe("t", fid, 0) for fid in ids))
        assert [s.function_id for s in (await store.get("t")).subscribers] == ids
        assert conflicts > 0  # the races really happened
        await asyncio.gather(*(store.unsubscribe("t", fid) for fid in ids[:-1]))
        assert [s.function_id for s in (await store.get("t")).subscribers] == ids[-1:]
        await store.unsubscribe("t", ids[-1])
        assert await engine.get_state(SCOPE, "t") is None
