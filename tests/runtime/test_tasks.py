"""Owned tasks: cancelled and awaited together, failures reported, no spawning after close."""

from __future__ import annotations

import asyncio

import pytest

from tackroom.runtime.tasks import TaskSet


async def test_cancel_all_cancels_and_awaits_every_task() -> None:
    tasks = TaskSet(owner="test")
    cleaned: list[int] = []

    async def forever(n: int) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append(n)

    spawned = [tasks.spawn(forever(n)) for n in range(3)]
    await asyncio.sleep(0)
    await tasks.cancel_all()
    assert sorted(cleaned) == [0, 1, 2]
    assert all(task.cancelled() for task in spawned)
    assert len(tasks) == 0


async def test_a_failure_is_reported_at_once() -> None:
    failures: list[BaseException] = []
    tasks = TaskSet(owner="test", on_error=lambda task, exc: failures.append(exc))

    async def boom() -> None:
        raise ValueError("boom")

    task = tasks.spawn(boom())
    await asyncio.wait({task})
    assert [str(exc) for exc in failures] == ["boom"]
    await tasks.cancel_all()


async def test_wait_all_waits_for_finishing_tasks() -> None:
    tasks = TaskSet(owner="test")
    gate = asyncio.Event()

    async def waiter() -> int:
        await gate.wait()
        return 1

    task = tasks.spawn(waiter())
    gate.set()
    await tasks.wait_all()
    assert task.result() == 1


async def test_no_spawning_after_close() -> None:
    tasks = TaskSet(owner="test")
    await tasks.cancel_all()

    async def nothing() -> None:
        return None

    with pytest.raises(RuntimeError, match="closed"):
        tasks.spawn(nothing())
