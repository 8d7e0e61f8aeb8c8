"""``engine.transaction()``: several writes as one unit where the backend can.

On a backend with ``atomic_transactions`` (embedded: one SQLite transaction) the writes made
inside the block — by the task and by every handler it triggers in this process — become visible
together when the block ends, or not at all when it raises or loses a compare-and-set. On a
backend without (NATS) each write is made at once, in order, and the block only groups them; a
caller that needs all-or-nothing there orders its writes as an outbox (see the orchestrator).
Both keep read-your-writes and compare-and-set inside the block.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any

import pytest

from tackroom.engine import Engine, RevisionConflict


async def outside_the_block(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` in a task of a fresh context: another writer, not part of the block (a task
    started inside the block would inherit it)."""
    await asyncio.create_task(work, context=contextvars.Context())


async def test_writes_in_a_block_are_all_there_after_it(engine: Engine) -> None:
    async with engine.transaction():
        first = await engine.set_state("t", "a", {"n": 1}, expected_revision=0)
        await engine.update_state("t", "b", [{"op": "increment", "path": ["n"], "value": 2}])
        seq = await engine.append("s", "g", {"x": 1})
        again = await engine.set_state("t", "a", {"n": 2}, expected_revision=first.revision)
    entry = await engine.get_state("t", "a")
    assert entry is not None
    assert entry.value == {"n": 2}
    assert entry.revision == again.revision
    b = await engine.get_state("t", "b")
    assert b is not None
    assert b.value == {"n": 2}
    records = await engine.read("s", "g")
    assert [r.data for r in records] == [{"x": 1}]
    assert records[0].seq >= seq


async def test_a_block_reads_its_own_writes(engine: Engine) -> None:
    async with engine.transaction():
        await engine.set_state("t", "a", {"n": 1})
        seen = await engine.get_state("t", "a")
        assert seen is not None
        assert seen.value == {"n": 1}
        listed = await engine.list_state("t")
        assert [e.key for e in listed] == ["a"]
        await engine.delete_state("t", "a")
        assert await engine.get_state("t", "a") is None
    assert await engine.get_state("t", "a") is None


async def test_compare_and_set_inside_a_block_checks_what_the_block_sees(engine: Engine) -> None:
    stored = await engine.set_state("t", "a", 1)
    async with engine.transaction():
        with pytest.raises(RevisionConflict):
            await engine.set_state("t", "a", 2, expected_revision=stored.revision + 100)
        mine = await engine.set_state("t", "a", 3, expected_revision=stored.revision)
        with pytest.raises(RevisionConflict):
            await engine.set_state("t", "a", 4, expected_revision=stored.revision)
        await engine.set_state("t", "a", 5, expected_revision=mine.revision)
    entry = await engine.get_state("t", "a")
    assert entry is not None
    assert entry.value == 5


async def test_a_block_that_raises_keeps_nothing_where_atomic(engine: Engine) -> None:
    async def write_then_fail() -> None:
        async with engine.transaction():
            await engine.set_state("t", "a", 1)
            await engine.append("s", "g", {"x": 1})
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await write_then_fail()
    kept = await engine.get_state("t", "a")
    if engine.atomic_transactions:
        assert kept is None
        assert await engine.read("s", "g") == []
    else:
        assert kept is not None  # written at once, in order


async def test_others_see_a_blocks_writes_only_when_it_ends_where_atomic(engine: Engine) -> None:
    subscription = await engine.subscribe("s", "g")
    outside: dict[str, Any] = {}

    async def look() -> None:
        outside["entry"] = await engine.get_state("t", "a")

    async with engine.transaction():
        await engine.set_state("t", "a", 1)
        await engine.append("s", "g", {"x": 1})
        await outside_the_block(look())
        if engine.atomic_transactions:
            assert outside["entry"] is None
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await anext(aiter(subscription))
    record = await asyncio.wait_for(anext(aiter(subscription)), 5)
    assert record.data == {"x": 1}
    assert record.seq == 1
    await subscription.aclose()


async def test_handlers_triggered_in_a_block_write_in_it(engine: Engine) -> None:
    async def write(payload: Any) -> Any:
        await engine.set_state("t", payload["key"], payload["value"])
        return await engine.append("s", "g", payload)

    await engine.register_function("test::write", write)

    async def trigger_then_fail() -> None:
        async with engine.transaction():
            await engine.trigger("test::write", {"key": "a", "value": 1})
            seen = await engine.get_state("t", "a")
            assert seen is not None
            assert seen.value == 1
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await trigger_then_fail()
    if engine.atomic_transactions:
        assert await engine.get_state("t", "a") is None
    async with engine.transaction():
        await engine.trigger("test::write", {"key": "b", "value": 2})
    entry = await engine.get_state("t", "b")
    assert entry is not None
    assert entry.value == 2


async def test_a_block_loses_to_a_write_that_lands_first_where_atomic(engine: Engine) -> None:
    stored = await engine.set_state("t", "a", 1)

    async def interfere() -> None:
        await engine.set_state("t", "a", "other")

    if not engine.atomic_transactions:
        pytest.skip("writes are made at once: there is no later commit to lose")

    async def lose() -> None:
        async with engine.transaction():
            await engine.set_state("t", "a", 2, expected_revision=stored.revision)
            await engine.append("s", "g", {"x": 1})
            await outside_the_block(interfere())

    with pytest.raises(RevisionConflict):
        await lose()
    entry = await engine.get_state("t", "a")
    assert entry is not None
    assert entry.value == "other"
    assert await engine.read("s", "g") == []


async def test_nested_blocks_join_the_outer_one(engine: Engine) -> None:
    async def nest_then_fail() -> None:
        async with engine.transaction():
            async with engine.transaction():
                await engine.set_state("t", "inner", 1)
            await engine.set_state("t", "outer", 1)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await nest_then_fail()
    if engine.atomic_transactions:
        assert await engine.get_state("t", "inner") is None
    async with engine.transaction(), engine.transaction():
        await engine.set_state("t", "inner", 2)
    assert await engine.get_state("t", "inner") is not None


async def test_sequences_stay_contiguous_across_blocks_and_plain_appends(engine: Engine) -> None:
    await engine.append("s", "g", 1)
    async with engine.transaction():
        await engine.append("s", "g", 2)
        await engine.append("s", "g", 3)
    await engine.append("s", "g", 4)
    records = await engine.read("s", "g")
    assert [(r.seq, r.data) for r in records] == [(1, 1), (2, 2), (3, 3), (4, 4)]
