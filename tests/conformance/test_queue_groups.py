"""Queue groups: in order and one at a time within a group, in parallel across groups."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import Counter
from typing import Any

from tackroom.engine import Engine
from tackroom.testing import FAST_QUEUE, Call, RecordingHandler, WaitTimeout, wait_until


class ConcurrencyProbe:
    """Tracks how many deliveries run at once, overall and per group."""

    def __init__(self) -> None:
        self.active: Counter[str | None] = Counter()
        self.max_per_group: Counter[str | None] = Counter()
        self.max_total = 0

    @property
    def total(self) -> int:
        return sum(self.active.values())

    def enter(self, group: str | None) -> None:
        self.active[group] += 1
        self.max_per_group[group] = max(self.max_per_group[group], self.active[group])
        self.max_total = max(self.max_total, self.total)

    def leave(self, group: str | None) -> None:
        self.active[group] -= 1


async def test_groups_are_ordered_and_exclusive_but_run_in_parallel(engine: Engine) -> None:
    await engine.configure_queue("chat", FAST_QUEUE)
    probe = ConcurrencyProbe()

    async def turn(call: Call) -> Any:
        probe.enter(call.group)
        try:
            # Hold the slot until another group runs too (a serial engine never gets there).
            with contextlib.suppress(WaitTimeout):
                await wait_until(lambda: probe.max_total >= 2, timeout=3)
            await asyncio.sleep(0.01)
        finally:
            probe.leave(call.group)

    handler = RecordingHandler(turn)
    await engine.register_function("chat::turn", handler)
    groups = ["s1", "s2", "s3"]
    for n in range(5):
        for group in groups:
            await engine.enqueue("chat::turn", {"g": group, "n": n}, queue="chat", group=group)

    await handler.wait_for_finished(15, timeout=30)

    for group in groups:
        seen = [c.payload["n"] for c in handler.calls if c.group == group]
        assert seen == [0, 1, 2, 3, 4], f"group {group} out of order: {seen}"
        assert probe.max_per_group[group] == 1, f"group {group} ran concurrently"
    assert probe.max_total > 1, "different groups never ran in parallel"


async def test_messages_without_group_run_in_parallel(engine: Engine) -> None:
    await engine.configure_queue("jobs", FAST_QUEUE)
    probe = ConcurrencyProbe()

    async def job(call: Call) -> Any:
        probe.enter(None)
        try:
            await wait_until(lambda: probe.max_total >= 3, timeout=5)
        finally:
            probe.leave(None)

    handler = RecordingHandler(job)
    await engine.register_function("jobs::run", handler)
    for n in range(3):
        await engine.enqueue("jobs::run", {"n": n}, queue="jobs")

    await handler.wait_for_finished(3)

    assert probe.max_total == 3


async def test_queue_concurrency_limits_parallel_deliveries(engine: Engine) -> None:
    await engine.configure_queue("jobs", dataclasses.replace(FAST_QUEUE, concurrency=2))
    probe = ConcurrencyProbe()

    async def job(call: Call) -> Any:
        probe.enter(None)
        try:
            with contextlib.suppress(WaitTimeout):
                await wait_until(lambda: probe.max_total >= 2, timeout=3)
            await asyncio.sleep(0.02)
        finally:
            probe.leave(None)

    handler = RecordingHandler(job)
    await engine.register_function("jobs::run", handler)
    for n in range(6):
        await engine.enqueue("jobs::run", {"n": n}, queue="jobs")

    await handler.wait_for_finished(6, timeout=30)

    assert probe.max_total == 2


async def test_group_order_is_kept_across_a_retry(engine: Engine) -> None:
    await engine.configure_queue("chat", FAST_QUEUE)

    async def first_fails_once(call: Call) -> Any:
        if call.payload["n"] == 1 and call.attempt == 1:
            raise RuntimeError("transient")
        return "ok"

    handler = RecordingHandler(first_fails_once)
    await engine.register_function("chat::turn", handler)
    await engine.enqueue("chat::turn", {"n": 1}, queue="chat", group="s1")
    await engine.enqueue("chat::turn", {"n": 2}, queue="chat", group="s1")

    calls = await handler.wait_for_finished(3)

    assert [(c.payload["n"], c.attempt) for c in calls] == [(1, 1), (1, 2), (2, 1)]


async def test_next_message_of_a_group_waits_until_the_previous_is_dead(engine: Engine) -> None:
    await engine.configure_queue("chat", dataclasses.replace(FAST_QUEUE, max_deliveries=2))

    async def first_always_fails(call: Call) -> Any:
        if call.payload["n"] == 1:
            raise RuntimeError("poison")
        return "ok"

    handler = RecordingHandler(first_always_fails)
    await engine.register_function("chat::turn", handler)
    poison = await engine.enqueue("chat::turn", {"n": 1}, queue="chat", group="s1")
    await engine.enqueue("chat::turn", {"n": 2}, queue="chat", group="s1")

    calls = await handler.wait_for_finished(3)

    assert [(c.payload["n"], c.attempt) for c in calls] == [(1, 1), (1, 2), (2, 1)]
    assert [d.message_id for d in await engine.list_dead_letters("chat")] == [poison]


async def test_a_saturated_queue_does_not_starve_another_queue(engine: Engine) -> None:
    await engine.configure_queue("slow", dataclasses.replace(FAST_QUEUE, concurrency=1))
    release = asyncio.Event()

    async def block(call: Call) -> Any:
        await release.wait()

    slow = RecordingHandler(block)
    fast = RecordingHandler()
    await engine.register_function("slow::job", slow)
    await engine.register_function("fast::job", fast)
    try:
        for n in range(300):
            await engine.enqueue("slow::job", {"n": n}, queue="slow")
        await slow.wait_for_calls(1)
        await engine.enqueue("fast::job", {"n": 0}, queue="fast")

        await fast.wait_for_calls(1, timeout=5)
    finally:
        release.set()
