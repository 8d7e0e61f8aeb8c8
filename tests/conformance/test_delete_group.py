"""Deleting one group of a stream: the group reads empty, others stay, sequences go on."""

from __future__ import annotations

from tackroom.engine import Engine, StreamRecord
from tackroom.testing import next_item, take


def _seqs(records: list[StreamRecord]) -> list[int]:
    return [record.seq for record in records]


async def test_deleted_group_reads_empty_and_others_are_untouched(engine: Engine) -> None:
    for i in range(3):
        await engine.append("chat", "gone", {"i": i})
    await engine.append("chat", "kept", {"i": 0})
    await engine.append("other", "gone", {"i": 0})

    assert await engine.delete_group("chat", "gone") == 3

    assert await engine.read("chat", "gone") == []
    assert _seqs(await engine.read("chat", "kept")) == [1]
    assert _seqs(await engine.read("other", "gone")) == [1]


async def test_delete_is_idempotent_and_unknown_groups_delete_nothing(engine: Engine) -> None:
    await engine.append("chat", "gone", {"i": 0})
    assert await engine.delete_group("chat", "gone") == 1
    assert await engine.delete_group("chat", "gone") == 0
    assert await engine.delete_group("chat", "never") == 0
    assert await engine.delete_group("never-appended", "never") == 0


async def test_appends_after_a_delete_continue_with_higher_sequences(engine: Engine) -> None:
    for i in range(2):
        await engine.append("chat", "gone", {"i": i})
    await engine.delete_group("chat", "gone")

    assert await engine.append("chat", "gone", {"i": 2}) == 3
    assert [(r.seq, r.data) for r in await engine.read("chat", "gone")] == [(3, {"i": 2})]


async def test_subscription_after_a_delete_sees_only_new_records(engine: Engine) -> None:
    await engine.append("chat", "gone", {"i": 0})
    await engine.delete_group("chat", "gone")

    subscription = await engine.subscribe("chat", "gone")
    try:
        await engine.append("chat", "gone", {"i": 1})
        [record] = await take(subscription, 1)
    finally:
        await subscription.aclose()
    assert (record.seq, record.data) == (2, {"i": 1})


async def test_live_subscription_survives_a_delete_of_its_group(engine: Engine) -> None:
    """A record deleted before the subscriber read it may or may not reach it; the next does."""
    subscription = await engine.subscribe("chat", "gone")
    try:
        await engine.append("chat", "gone", {"i": 0})
        await engine.delete_group("chat", "gone")
        await engine.append("chat", "gone", {"i": 1})
        seen = [await next_item(subscription)]
        if seen[0].seq == 1:
            seen.append(await next_item(subscription))
    finally:
        await subscription.aclose()
    assert seen[-1].seq == 2
    assert seen[-1].data == {"i": 1}
