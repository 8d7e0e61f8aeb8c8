"""Channels: ordered frames from a writer to one reader, close, abort, backpressure.

Each test runs with the writer in the reader's engine and, where a backend lets a writer live
elsewhere (NATS), with the writer on a second engine connected to the same server (``peer``):
the frames then cross the wire instead of being handed over in process.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tackroom.engine import (
    Channel,
    ChannelAborted,
    ChannelClosed,
    ChannelRef,
    Engine,
    InvalidPayload,
)
from tackroom.testing import next_item, take


async def _drain(channel: Channel) -> list[Any]:
    return [frame async for frame in channel]


async def test_frames_arrive_in_order_and_close_ends_iteration(
    engine: Engine, peer: Engine
) -> None:
    channel = await engine.open_channel(capacity=64)
    writer = peer.channel_writer(channel.ref)
    frames = [{"token": f"t{i}"} for i in range(20)] + ["text", 3, None, [1, 2]]

    for frame in frames:
        await writer.send(frame)
    await writer.close()

    assert await asyncio.wait_for(_drain(channel), 10) == frames


async def test_close_without_frames_ends_iteration_at_once(engine: Engine, peer: Engine) -> None:
    channel = await engine.open_channel()
    await peer.channel_writer(channel.ref).close()

    assert await asyncio.wait_for(_drain(channel), 10) == []


async def test_frames_are_copied(engine: Engine, peer: Engine) -> None:
    channel = await engine.open_channel()
    writer = peer.channel_writer(channel.ref)
    frame = {"tokens": ["a"]}

    await writer.send(frame)
    frame["tokens"].append("mutated")
    await writer.close()

    assert await asyncio.wait_for(_drain(channel), 10) == [{"tokens": ["a"]}]


async def test_non_json_frame_raises_invalid_payload(engine: Engine, peer: Engine) -> None:
    channel = await engine.open_channel()
    writer = peer.channel_writer(channel.ref)

    with pytest.raises(InvalidPayload):
        await writer.send({"bad": object()})
    await writer.send("fine")
    await writer.close()

    assert await asyncio.wait_for(_drain(channel), 10) == ["fine"]


async def test_abort_raises_channel_aborted_with_reason_after_the_sent_frames(
    engine: Engine, peer: Engine
) -> None:
    channel = await engine.open_channel()
    writer = peer.channel_writer(channel.ref)
    await writer.send(1)
    await writer.send(2)
    await writer.abort("provider crashed")

    assert await take(channel, 2) == [1, 2]
    with pytest.raises(ChannelAborted) as caught:
        await next_item(channel)
    assert caught.value.reason == "provider crashed"


async def test_send_after_close_raises_channel_closed(engine: Engine, peer: Engine) -> None:
    channel = await engine.open_channel()
    writer = peer.channel_writer(channel.ref)
    await writer.close()

    with pytest.raises(ChannelClosed):
        await writer.send("late")


async def test_send_after_abort_raises_channel_closed(engine: Engine, peer: Engine) -> None:
    channel = await engine.open_channel()
    writer = peer.channel_writer(channel.ref)
    await writer.abort("gave up")

    with pytest.raises(ChannelClosed):
        await writer.send("late")


async def test_send_after_reader_aclose_raises_channel_closed(engine: Engine, peer: Engine) -> None:
    channel = await engine.open_channel()
    writer = peer.channel_writer(channel.ref)
    await writer.send("first")
    await channel.aclose()

    with pytest.raises(ChannelClosed):
        await asyncio.wait_for(writer.send("late"), 10)


async def test_send_waits_while_the_reader_is_capacity_frames_behind(
    engine: Engine, peer: Engine
) -> None:
    channel = await engine.open_channel(capacity=2)
    writer = peer.channel_writer(channel.ref)
    await asyncio.wait_for(writer.send(1), 5)
    await asyncio.wait_for(writer.send(2), 5)

    third = asyncio.create_task(writer.send(3))
    try:
        done, _ = await asyncio.wait({third}, timeout=0.2)
        assert not done, "the third send completed although nobody read"

        assert await next_item(channel) == 1
        await asyncio.wait_for(asyncio.shield(third), 5)
    finally:
        if not third.done():
            third.cancel()
    await writer.close()

    assert await asyncio.wait_for(_drain(channel), 10) == [2, 3]


async def test_ref_round_trips_through_json_and_a_payload(engine: Engine) -> None:
    channel = await engine.open_channel()
    wire = json.loads(json.dumps(channel.ref.to_json()))
    assert ChannelRef.from_json(wire) == channel.ref

    async def provider(payload: Any) -> Any:
        writer = engine.channel_writer(ChannelRef.from_json(payload["channel"]))
        for token in ["Hel", "lo"]:
            await writer.send({"token": token})
        await writer.close()
        return "streamed"

    await engine.register_function("provider::stream", provider)
    result = await engine.trigger("provider::stream", {"channel": channel.ref.to_json()}, timeout=5)

    assert result == "streamed"
    assert await asyncio.wait_for(_drain(channel), 10) == [{"token": "Hel"}, {"token": "lo"}]


async def test_abort_does_not_wait_for_buffer_space(engine: Engine, peer: Engine) -> None:
    channel = await engine.open_channel(capacity=1)
    writer = peer.channel_writer(channel.ref)
    await asyncio.wait_for(writer.send("only"), 5)

    await asyncio.wait_for(writer.abort("stop"), 5)

    assert await next_item(channel) == "only"
    with pytest.raises(ChannelAborted) as caught:
        await next_item(channel)
    assert caught.value.reason == "stop"


async def test_send_blocked_on_a_full_channel_fails_when_the_reader_closes(
    engine: Engine, peer: Engine
) -> None:
    channel = await engine.open_channel(capacity=1)
    writer = peer.channel_writer(channel.ref)
    await asyncio.wait_for(writer.send(1), 5)
    blocked = asyncio.create_task(writer.send(2))
    done, _ = await asyncio.wait({blocked}, timeout=0.1)
    assert not done, "the second send completed although the channel was full"

    await channel.aclose()

    with pytest.raises(ChannelClosed):
        await asyncio.wait_for(blocked, 5)
