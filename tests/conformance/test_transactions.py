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
from collections.abc import Awaitable, Callable, Coroutine
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


# -- writers that commit at the same time (embedded: one shared SQLite transaction) ----------------
async def _all_at_once(
    count: int, body: Callable[[int, asyncio.Event], Awaitable[Any]]
) -> list[Any]:
    """Run ``body(i, gate)`` for each ``i`` at once; each waits on ``gate`` where it likes, and
    the gate opens once all are waiting: their commits then come in one loop turn."""
    gate = asyncio.Event()
    waiting = 0

    async def one(index: int) -> Any:
        nonlocal waiting
        waiting += 1
        if waiting == count:
            gate.set()
        return await body(index, gate)

    return await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)


async def test_blocks_ending_together_each_stay_whole(engine: Engine) -> None:
    """One block of a batch loses its compare-and-set: it raises and leaves nothing, the others
    land whole."""
    if not engine.atomic_transactions:
        pytest.skip("writes are made at once: there is no later commit to lose")
    count, loser = 20, 7
    stored = [await engine.set_state("t", f"k{i}", "before") for i in range(count)]

    async def interfere() -> None:
        await engine.set_state("t", f"k{loser}", "other")

    async def block(index: int, gate: asyncio.Event) -> None:
        async with engine.transaction():
            await engine.set_state(
                "t", f"k{index}", "mine", expected_revision=stored[index].revision
            )
            await engine.append("s", f"g{index}", {"i": index})
            await engine.enqueue("test::nobody", {"i": index}, queue="q")
            if index == loser:
                await outside_the_block(interfere())
            await gate.wait()

    outcomes = await _all_at_once(count, block)
    assert isinstance(outcomes[loser], RevisionConflict)
    assert [o for i, o in enumerate(outcomes) if i != loser] == [None] * (count - 1)
    for index in range(count):
        entry = await engine.get_state("t", f"k{index}")
        assert entry is not None
        records = await engine.read("s", f"g{index}")
        if index == loser:
            assert entry.value == "other"
            assert records == []
        else:
            assert entry.value == "mine"
            assert [r.data for r in records] == [{"i": index}]


async def test_plain_writes_made_together_lose_no_update(engine: Engine) -> None:
    count = 30
    start = await engine.set_state("t", "cas", "start")
    seqs: dict[int, int] = {}

    async def write(index: int, gate: asyncio.Event) -> None:
        await gate.wait()
        await engine.update_state("t", "n", [{"op": "increment", "path": ["n"], "value": 1}])
        seqs[index] = await engine.append("s", "g", {"i": index})
        await engine.set_state("t", "cas", index, expected_revision=start.revision)

    outcomes = await _all_at_once(count, write)
    counter = await engine.get_state("t", "n")
    assert counter is not None
    assert counter.value == {"n": count}
    # One compare-and-set wins; the others see its write and change nothing.
    winners = [i for i, outcome in enumerate(outcomes) if outcome is None]
    assert len(winners) == 1
    assert all(isinstance(o, RevisionConflict) for o in outcomes if o is not None)
    cas = await engine.get_state("t", "cas")
    assert cas is not None
    assert cas.value == winners[0]
    records = await engine.read("s", "g")
    assert [r.seq for r in records] == list(range(1, count + 1))
    # Each append was told the sequence its record got.
    assert {r.data["i"]: r.seq for r in records} == seqs


async def test_blocks_appending_to_one_group_together_keep_sequences_whole(
    engine: Engine,
) -> None:
    count = 10
    await engine.append("s", "g", {"i": -1, "n": 0})  # the group has a head before the blocks
    subscription = await engine.subscribe("s", "g", after=1)

    async def block(index: int, gate: asyncio.Event) -> None:
        async with engine.transaction():
            await engine.append("s", "g", {"i": index, "n": 1})
            await engine.append("s", "g", {"i": index, "n": 2})
            await gate.wait()

    assert await _all_at_once(count, block) == [None] * count
    records = (await engine.read("s", "g"))[1:]
    assert [r.seq for r in records] == list(range(2, 2 * count + 2))
    if engine.atomic_transactions:  # each block's records are together, in its order
        pairs = [(r.data["i"], r.data["n"]) for r in records]
        assert all(pairs[k] == (pairs[k][0], 1) for k in range(0, 2 * count, 2))
        assert all(pairs[k + 1] == (pairs[k][0], 2) for k in range(0, 2 * count, 2))
    live = [await asyncio.wait_for(anext(aiter(subscription)), 5) for _ in range(2 * count)]
    assert [r.seq for r in live] == list(range(2, 2 * count + 2))
    await subscription.aclose()
