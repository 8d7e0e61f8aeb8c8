"""The live merge on a real engine: stored events, one snapshot, the updates after it."""

from __future__ import annotations

from typing import Any

from tackroom.contracts.events import EVENTS, MessageSnapshotData, StreamedPart
from tackroom.engine.embedded import EmbeddedEngine
from tackroom.kit.live import LiveFeed, RunLive
from tackroom.testing import take


def _stored(kind: str, message_id: str = "m") -> dict[str, Any]:
    data: dict[str, Any] = {"message_id": message_id}
    if kind == "message_complete":
        data["message"] = {"role": "assistant", "content": [{"type": "text", "text": "Hello!"}]}
    return {"type": kind, "session_id": "s", "run_id": "r", "event_id": kind, "data": data}


def _kinds(records: list[Any]) -> list[tuple[str, Any]]:
    out = []
    for record in records:
        data = record.data["data"]
        what = data.get("delta") or data.get("through") or record.seq
        out.append((record.data["type"], what))
    return out


async def test_a_reader_joining_mid_answer_gets_the_snapshot_then_only_newer_updates() -> None:
    async with EmbeddedEngine() as engine:
        live = RunLive(engine, session_id="s", run_id="r")
        await engine.append(EVENTS.name, "s", _stored("turn_state_changed"))
        through = [0]

        def snapshot() -> MessageSnapshotData:
            text = "".join(["Hel", "lo"][: through[0]])
            return MessageSnapshotData(
                message_id="m",
                stream_id="a",
                parts=[StreamedPart(kind="text", text=text)],
                through=through[0],
            )

        async with live.offering("m", snapshot):
            feed = await LiveFeed.open(engine, "s", after=0)
            for index, delta in enumerate(["Hel", "lo"], start=1):
                await live.update(
                    message_id="m", stream_id="a", kind="text", delta=delta, index=index
                )
                through[0] = index
            # the snapshot is taken on the first read: it holds updates 1 and 2 already
            first = await take(feed, 2)
            await live.update(message_id="m", stream_id="a", kind="text", delta="!", index=3)
            third = await take(feed, 1)
        await engine.append(EVENTS.name, "s", _stored("message_complete"))
        await live.update(message_id="m", stream_id="a", kind="text", delta="late", index=4)
        await engine.append(EVENTS.name, "s", _stored("agent_end"))
        rest = await take(feed, 2)
        await feed.aclose()
        stored = await engine.read(EVENTS.name, "s")
    assert _kinds(first + third + rest) == [
        ("turn_state_changed", 1),
        ("message_snapshot", 2),
        ("message_update", "!"),
        ("message_complete", 2),
        ("agent_end", 3),
    ]
    snap = (first + third)[1]
    assert (snap.live, snap.seq) == (True, 1)  # after the stored record it follows
    assert snap.data["data"]["parts"] == [{"kind": "text", "text": "Hello"}]
    assert EVENTS.parse(snap.data).type == "message_snapshot"
    assert [r.data["type"] for r in stored] == [
        "turn_state_changed",
        "message_complete",
        "agent_end",
    ]


async def test_a_snapshot_waits_for_the_stored_events_before_it() -> None:
    async with EmbeddedEngine() as engine:
        for kind in ("turn_state_changed", "context_assembled"):
            await engine.append(EVENTS.name, "s", _stored(kind))
        offered = MessageSnapshotData(message_id="m", stream_id="a", through=1)
        async with engine.offer_snapshot(EVENTS.name, "s", lambda: _frame(offered)):
            feed = await LiveFeed.open(engine, "s", after=0)
            got = await take(feed, 3)
            await feed.aclose()
            follow = await LiveFeed.open(engine, "s", after=0, snapshots=False)
            await engine.append(EVENTS.name, "s", _stored("agent_end"))
            plain = await take(follow, 3)
            await follow.aclose()
    assert [r.data["type"] for r in got] == [
        "turn_state_changed",
        "context_assembled",
        "message_snapshot",
    ]
    assert [r.data["type"] for r in plain] == [
        "turn_state_changed",
        "context_assembled",
        "agent_end",
    ]


def _frame(data: MessageSnapshotData) -> dict[str, Any]:
    return {
        "type": "message_snapshot",
        "session_id": "s",
        "run_id": "r",
        "event_id": "r:m:a:s1",
        "data": data.model_dump(mode="json"),
    }


async def test_a_snapshot_whose_stored_records_never_come_goes_out_before_its_next_update() -> None:
    async with EmbeddedEngine() as engine:
        live = RunLive(engine, session_id="s", run_id="r")
        for kind in ("turn_state_changed", "context_assembled"):
            await engine.append(EVENTS.name, "s", _stored(kind))
        await engine.delete_group(EVENTS.name, "s")  # the head (2) stays, the records go
        held = MessageSnapshotData(
            message_id="m", stream_id="a", parts=[StreamedPart(kind="text", text="Hel")], through=1
        )
        async with live.offering("m", lambda: held):
            feed = await LiveFeed.open(engine, "s", after=0)
            for index, delta in enumerate(["Hel", "lo"], start=1):
                await live.update(
                    message_id="m", stream_id="a", kind="text", delta=delta, index=index
                )
            got = await take(feed, 2)
            await feed.aclose()
    assert _kinds(got) == [("message_snapshot", 1), ("message_update", "lo")]
    assert [r.seq for r in got] == [0, 0]  # nothing stored was handed out before them
