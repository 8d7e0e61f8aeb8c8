"""Streams: per-group sequences, read, subscribe (replay then live), retention."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tackroom.engine import Engine, InvalidPayload, StreamRecord, StreamRetention
from tackroom.testing import take, wait_until


def _seqs(records: list[StreamRecord]) -> list[int]:
    return [record.seq for record in records]


async def test_sequences_count_per_stream_and_group(engine: Engine) -> None:
    assert [await engine.append("chat", "a", {"i": i}) for i in range(3)] == [1, 2, 3]
    assert await engine.append("chat", "b", {"i": 0}) == 1
    assert await engine.append("other", "a", {"i": 0}) == 1
    assert await engine.append("chat", "a", {"i": 3}) == 4


async def test_read_after_and_limit(engine: Engine) -> None:
    for i in range(5):
        await engine.append("chat", "a", {"i": i})
    await engine.append("chat", "b", {"i": 99})

    everything = await engine.read("chat", "a")
    assert _seqs(everything) == [1, 2, 3, 4, 5]
    assert [r.data for r in everything] == [{"i": i} for i in range(5)]
    assert all((r.stream, r.group_id) == ("chat", "a") for r in everything)
    assert all(isinstance(r.timestamp, float) for r in everything)

    assert _seqs(await engine.read("chat", "a", after=2)) == [3, 4, 5]
    assert _seqs(await engine.read("chat", "a", after=1, limit=2)) == [2, 3]
    assert await engine.read("chat", "a", after=5) == []
    assert await engine.read("chat", "nobody") == []
    assert await engine.read("nothing", "a") == []


async def test_appended_data_is_a_copy(engine: Engine) -> None:
    data = {"tokens": ["a"]}
    await engine.append("chat", "a", data)
    data["tokens"].append("mutated")

    [record] = await engine.read("chat", "a")
    assert record.data == {"tokens": ["a"]}


@pytest.mark.parametrize("data", [object(), {"s": {1}}], ids=["object", "set"])
async def test_non_json_record_raises_invalid_payload_and_appends_nothing(
    engine: Engine, data: Any
) -> None:
    with pytest.raises(InvalidPayload):
        await engine.append("chat", "a", data)
    assert await engine.read("chat", "a") == []
    assert await engine.append("chat", "a", "ok") == 1


async def test_subscribe_replays_stored_then_live_records(engine: Engine) -> None:
    for i in range(3):
        await engine.append("chat", "a", {"i": i})
    subscription = await engine.subscribe("chat", "a")
    try:
        stored = await take(subscription, 3)
        for i in range(3, 6):
            await engine.append("chat", "a", {"i": i})
        await engine.append("chat", "other-group", {"i": -1})
        live = await take(subscription, 3)
    finally:
        await subscription.aclose()

    assert _seqs(stored + live) == [1, 2, 3, 4, 5, 6]
    assert [r.data for r in stored + live] == [{"i": i} for i in range(6)]


async def test_each_subscriber_gets_its_own_copy(engine: Engine) -> None:
    await engine.append("chat", "a", "stored")
    first = await engine.subscribe("chat", "a")
    second = await engine.subscribe("chat", "a")
    try:
        await take(first, 1)  # both caught up: the next record arrives live
        await take(second, 1)
        await engine.append("chat", "a", {"tokens": ["a"]})
        [mine] = await take(first, 1)
        mine.data["tokens"].append("mutated by the first subscriber")
        [theirs] = await take(second, 1)
    finally:
        await first.aclose()
        await second.aclose()

    assert theirs.data == {"tokens": ["a"]}
    assert [r.data for r in await engine.read("chat", "a")] == ["stored", {"tokens": ["a"]}]


async def test_subscribe_after_a_cursor(engine: Engine) -> None:
    for i in range(4):
        await engine.append("chat", "a", {"i": i})
    subscription = await engine.subscribe("chat", "a", after=2)
    try:
        records = await take(subscription, 2)
        await engine.append("chat", "a", {"i": 4})
        records += await take(subscription, 1)
    finally:
        await subscription.aclose()

    assert _seqs(records) == [3, 4, 5]


async def test_subscribe_while_appending_has_no_gap_and_no_duplicate(engine: Engine) -> None:
    total = 200
    halfway = asyncio.Event()

    async def produce() -> None:
        for i in range(total):
            await engine.append("chat", "a", {"i": i})
            if i == total // 2:
                halfway.set()
            await asyncio.sleep(0)

    producer = asyncio.create_task(produce())
    await halfway.wait()  # subscribe mid-stream, while appends keep coming
    subscription = await engine.subscribe("chat", "a")
    try:
        records = await take(subscription, total)
    finally:
        await subscription.aclose()
        await producer

    assert _seqs(records) == list(range(1, total + 1))


async def test_reconnect_from_last_seen_seq_misses_nothing(engine: Engine) -> None:
    for i in range(3):
        await engine.append("chat", "a", {"i": i})
    first = await engine.subscribe("chat", "a")
    try:
        seen = await take(first, 3)
    finally:
        await first.aclose()

    await engine.append("chat", "a", {"i": 3})  # while disconnected
    await engine.append("chat", "a", {"i": 4})

    second = await engine.subscribe("chat", "a", after=seen[-1].seq)
    try:
        resumed = await take(second, 2)
        await engine.append("chat", "a", {"i": 5})
        resumed += await take(second, 1)
    finally:
        await second.aclose()

    assert _seqs(seen + resumed) == [1, 2, 3, 4, 5, 6]


async def test_retention_max_len_keeps_the_newest_per_group(engine: Engine) -> None:
    await engine.configure_stream("log", StreamRetention(max_len=3))
    for i in range(5):
        await engine.append("log", "a", {"i": i})
    for i in range(2):
        await engine.append("log", "b", {"i": i})

    await wait_until(lambda: _has_seqs(engine, "log", "a", [3, 4, 5]))
    assert _seqs(await engine.read("log", "b")) == [1, 2]
    assert await engine.append("log", "a", {"i": 5}) == 6  # sequences never restart
    await wait_until(lambda: _has_seqs(engine, "log", "a", [4, 5, 6]))


async def test_retention_max_age_drops_old_records(engine: Engine) -> None:
    await engine.configure_stream("log", StreamRetention(max_age=0.5))
    await engine.append("log", "a", {"i": 0})
    await engine.append("log", "a", {"i": 1})

    await wait_until(lambda: _has_seqs(engine, "log", "a", []))

    assert await engine.append("log", "a", {"i": 2}) == 3  # sequences never restart
    assert _seqs(await engine.read("log", "a")) == [3]


async def test_retention_applies_to_records_already_stored(engine: Engine) -> None:
    for i in range(5):
        await engine.append("log", "a", {"i": i})

    await engine.configure_stream("log", StreamRetention(max_len=2))

    await wait_until(
        lambda: _has_seqs(engine, "log", "a", [4, 5]),
        message="configure_stream(max_len=2) did not trim the 5 stored records",
    )


async def test_subscriber_far_behind_misses_nothing(engine: Engine) -> None:
    total = 1500
    subscription = await engine.subscribe("chat", "a")
    try:
        for i in range(total):  # nobody reads meanwhile
            await engine.append("chat", "a", {"i": i})
        records = await take(subscription, total)
        await engine.append("chat", "a", {"i": total})
        records += await take(subscription, 1)
    finally:
        await subscription.aclose()

    assert _seqs(records) == list(range(1, total + 2))


async def _has_seqs(engine: Engine, stream: str, group: str, expected: list[int]) -> bool:
    return _seqs(await engine.read(stream, group)) == expected
