"""Live frames (``publish``) and snapshots (``offer_snapshot`` / ``snapshot``): never stored,
handed to the subscriptions open now, after what their publisher appended before."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tackroom.engine import Engine, InvalidPayload, StreamRecord
from tackroom.testing import RecordingHandler, next_item, take


async def test_a_live_frame_reaches_open_subscriptions_only_and_is_never_stored(
    engine: Engine,
) -> None:
    await engine.append("chat", "s1", {"i": 1})
    first = await engine.subscribe("chat", "s1")
    second = await engine.subscribe("chat", "s1")
    other = await engine.subscribe("chat", "s2")
    try:
        assert [r.seq for r in await take(first, 1)] == [1]
        await engine.publish("chat", "s1", {"delta": "Hel"})
        await engine.publish("chat", "s1", {"delta": "lo"})
        await engine.append("chat", "s1", {"i": 2})

        records = await take(first, 3)
        assert [r.data for r in records if r.live] == [{"delta": "Hel"}, {"delta": "lo"}]
        assert [r.seq for r in records if not r.live] == [2]
        assert all((r.stream, r.group_id) == ("chat", "s1") for r in records)
        _follow_stored(records, after=1)

        seen = await take(second, 4)  # it had not read the first record yet: stored first
        assert (seen[0].seq, seen[0].live) == (1, False)
        assert [r.data for r in seen if r.live] == [{"delta": "Hel"}, {"delta": "lo"}]
        _follow_stored(seen, after=0)
    finally:
        for sub in (first, second, other):
            await sub.aclose()

    assert [r.data for r in await engine.read("chat", "s1")] == [{"i": 1}, {"i": 2}]
    later = await engine.subscribe("chat", "s1")
    try:
        assert [r.seq for r in await take(later, 2)] == [1, 2]
        await engine.append("chat", "s1", {"i": 3})
        assert not (await next_item(later)).live  # the earlier frames are gone for good
    finally:
        await later.aclose()
    idle = await engine.subscribe("chat", "s2")
    try:
        await engine.append("chat", "s2", {"j": 1})
        assert (await next_item(idle)).data == {"j": 1}  # s1's frames went to s1 only
    finally:
        await idle.aclose()


async def test_a_live_frame_comes_after_what_its_publisher_appended_before(
    engine: Engine,
) -> None:
    subscription = await engine.subscribe("log", "g")
    try:
        for i in range(20):
            await engine.append("log", "g", {"stored": i})
            await engine.publish("log", "g", {"live": i})
        records = await take(subscription, 40)
    finally:
        await subscription.aclose()
    _follow_stored(records, after=0)
    for record in records:
        if record.live:  # frame i was published after record i + 1 was appended
            assert record.seq >= record.data["live"] + 1, record
    assert [r.data["live"] for r in records if r.live] == list(range(20))
    assert [r.data["stored"] for r in records if not r.live] == list(range(20))


def _follow_stored(records: list[StreamRecord], *, after: int) -> None:
    """A live record's ``seq`` is the last stored one handed out before it (a cursor that never
    moves on a live record)."""
    cursor = after
    for record in records:
        if record.live:
            assert record.seq == cursor, record
        else:
            assert record.seq > cursor, record
            cursor = record.seq


async def test_publish_without_subscribers_and_a_non_json_frame(engine: Engine) -> None:
    await engine.publish("chat", "nobody", {"delta": "lost"})
    with pytest.raises(InvalidPayload):
        await engine.publish("chat", "nobody", {"bad": {1, 2}})
    assert await engine.read("chat", "nobody") == []


async def test_live_frames_never_fire_stream_triggers(engine: Engine) -> None:
    handler = RecordingHandler()
    await engine.register_function("on::chat", handler)
    await engine.add_stream_trigger("chat", "on::chat")
    await engine.publish("chat", "s1", {"delta": "not stored"})
    await engine.append("chat", "s1", {"text": "stored"})
    calls = await handler.wait_for_calls(1)
    assert [c.payload["data"] for c in calls] == [{"text": "stored"}]
    await asyncio.sleep(0.1)  # gives a wrong engine time to fire a second call
    assert len(handler.calls) == 1


async def test_snapshot_is_what_the_offer_gives_while_it_lasts(engine: Engine) -> None:
    assert await engine.snapshot("chat", "s1") == []  # nobody offers: answered at once
    await engine.append("chat", "s1", {"i": 1})
    text: list[str] = ["Hel"]

    def provider() -> dict[str, Any]:
        return {"so_far": "".join(text)}

    async with engine.offer_snapshot("chat", "s1", provider):
        [snap] = await engine.snapshot("chat", "s1")
        assert (snap.live, snap.data) == (True, {"so_far": "Hel"})
        assert (snap.stream, snap.group_id, snap.seq) == ("chat", "s1", 1)
        text.append("lo")  # asked anew each time
        await engine.append("chat", "s1", {"i": 2})
        [snap] = await engine.snapshot("chat", "s1")
        assert (snap.data, snap.seq) == ({"so_far": "Hello"}, 2)
        assert await engine.snapshot("chat", "s2") == []
        async with engine.offer_snapshot("chat", "s1", lambda: {"other": True}):
            both = await engine.snapshot("chat", "s1")
            assert sorted(str(s.data) for s in both) == sorted(
                [str({"so_far": "Hello"}), str({"other": True})]
            )
        assert [s.data for s in await engine.snapshot("chat", "s1")] == [{"so_far": "Hello"}]
    assert await engine.snapshot("chat", "s1") == []
    assert [r.data for r in await engine.read("chat", "s1")] == [{"i": 1}, {"i": 2}]


async def test_a_failing_provider_is_left_out(engine: Engine) -> None:
    def broken() -> Any:
        raise RuntimeError("boom")

    async with (
        engine.offer_snapshot("chat", "s1", broken),
        engine.offer_snapshot("chat", "s1", lambda: "fine"),
    ):
        assert [s.data for s in await engine.snapshot("chat", "s1")] == ["fine"]
