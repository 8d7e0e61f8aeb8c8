"""Stream subscriptions the local endpoint holds for a connection (``endpoint::stream::*``):
stored and live records in order, batches within a frame, handles bounded, swept and released."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tackroom.contracts.endpoint import (
    STREAM_CLOSE,
    STREAM_NEXT,
    STREAM_OPEN,
    FollowedRecord,
    StreamCloseRequest,
    StreamNextRequest,
    StreamOpenRequest,
)
from tackroom.engine import Engine, InvocationError
from tackroom.harness.remote import EndpointSubscription
from tackroom.runtime import (
    EndpointUnavailable,
    FrameTooLarge,
    LocalClient,
    LocalEndpoint,
    TooManyStreams,
    UnknownStreamHandle,
)
from tackroom.testing import memory_engine, wait_until

FRAME_LIMIT = 4096


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    async with memory_engine() as started:
        yield started


async def serving(
    engine: Engine, path: Path, *, max_streams: int = 64, stream_idle_timeout: float = 120
) -> LocalEndpoint:
    endpoint = LocalEndpoint(
        engine,
        path=path,
        max_frame_bytes=FRAME_LIMIT,
        max_streams=max_streams,
        stream_idle_timeout=stream_idle_timeout,
    )
    await endpoint.start()
    return endpoint


@pytest.fixture
async def endpoint(engine: Engine, short_tmp: Path) -> AsyncIterator[LocalEndpoint]:
    served = await serving(engine, short_tmp / "t.sock")
    try:
        yield served
    finally:
        await served.close()


@pytest.fixture
async def client(endpoint: LocalEndpoint) -> AsyncIterator[LocalClient]:
    async with LocalClient(endpoint.path, max_frame_bytes=FRAME_LIMIT) as connected:
        yield connected


async def open_handle(client: LocalClient, *, after: int = 0) -> str:
    request = StreamOpenRequest(stream="ev", group_id="g", after=after)
    return (await STREAM_OPEN.call(client, request)).handle


async def take(client: LocalClient, handle: str, count: int) -> list[FollowedRecord]:
    taken: list[FollowedRecord] = []
    while len(taken) < count:
        batch = await STREAM_NEXT.call(client, StreamNextRequest(handle=handle, wait=5))
        assert batch.records, "a record came within the wait"
        taken.extend(batch.records)
    return taken


async def test_stored_then_live_records_in_order(engine: Engine, client: LocalClient) -> None:
    await engine.append("ev", "g", "first")
    handle = await open_handle(client)
    await engine.publish("ev", "g", "delta 1")
    await engine.append("ev", "g", "second")
    await engine.publish("ev", "g", "delta 2")
    taken = await take(client, handle, 4)
    assert [(r.seq, r.data, r.live) for r in taken] == [
        (1, "first", False),
        (1, "delta 1", True),
        (2, "second", False),
        (2, "delta 2", True),
    ]
    empty = await STREAM_NEXT.call(client, StreamNextRequest(handle=handle, wait=0))
    assert (empty.records, empty.ended) == ([], False)


async def test_a_poll_waiting_gets_a_frame_published_meanwhile(
    engine: Engine, client: LocalClient
) -> None:
    handle = await open_handle(client)
    waiting = asyncio.create_task(
        STREAM_NEXT.call(client, StreamNextRequest(handle=handle, wait=30))
    )
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await engine.publish("ev", "g", {"delta": "hi"})
    batch = await asyncio.wait_for(waiting, 10)
    assert [(r.data, r.live) for r in batch.records] == [({"delta": "hi"}, True)]


async def test_batches_fit_a_frame_and_a_reader_far_behind_loses_no_stored_record(
    engine: Engine, client: LocalClient
) -> None:
    handle = await open_handle(client)
    count = 3000  # past the endpoint's buffer and the engine subscription's own
    for n in range(count):
        await engine.append("ev", "g", {"n": n, "pad": "x" * 100})
    taken = await take(client, handle, count)
    assert [r.data["n"] for r in taken] == list(range(count))


async def test_live_frames_are_not_lost_while_the_reader_keeps_up(
    engine: Engine, client: LocalClient
) -> None:
    handle = await open_handle(client)
    taken: list[FollowedRecord] = []
    for chunk in range(5):
        for n in range(400):
            await engine.publish("ev", "g", chunk * 400 + n)
        taken.extend(await take(client, handle, 400))
    assert [r.data for r in taken] == list(range(2000))


async def test_a_record_larger_than_a_frame_is_refused_not_skipped_silently(
    engine: Engine, client: LocalClient
) -> None:
    handle = await open_handle(client)
    await engine.append("ev", "g", "x" * FRAME_LIMIT)
    with pytest.raises(FrameTooLarge):
        await STREAM_NEXT.call(client, StreamNextRequest(handle=handle, wait=5))


async def test_a_bad_handle_is_a_typed_error(client: LocalClient, endpoint: LocalEndpoint) -> None:
    with pytest.raises(UnknownStreamHandle):
        await STREAM_NEXT.call(client, StreamNextRequest(handle="nope", wait=0))
    handle = await open_handle(client)
    async with LocalClient(endpoint.path, max_frame_bytes=FRAME_LIMIT) as other:
        with pytest.raises(UnknownStreamHandle):  # a handle belongs to its connection
            await STREAM_NEXT.call(other, StreamNextRequest(handle=handle, wait=0))
    closed = await STREAM_CLOSE.call(client, StreamCloseRequest(handle=handle))
    assert closed.closed
    assert not (await STREAM_CLOSE.call(client, StreamCloseRequest(handle=handle))).closed
    with pytest.raises(UnknownStreamHandle):
        await STREAM_NEXT.call(client, StreamNextRequest(handle=handle, wait=0))
    with pytest.raises(InvocationError) as invalid:
        await client.trigger(STREAM_NEXT.id, {"handle": handle, "wait": -1})
    assert invalid.value.remote_code == "invalid_request"


async def test_a_connection_holds_a_bounded_number_of_handles(
    engine: Engine, short_tmp: Path
) -> None:
    endpoint = await serving(engine, short_tmp / "b.sock", max_streams=2)
    try:
        async with LocalClient(endpoint.path) as client:
            await open_handle(client)
            await open_handle(client)
            with pytest.raises(TooManyStreams):
                await open_handle(client)
            assert endpoint.open_streams == 2
    finally:
        await endpoint.close()


async def test_handles_are_released_when_the_connection_closes_even_mid_poll(
    endpoint: LocalEndpoint,
) -> None:
    client = LocalClient(endpoint.path, max_frame_bytes=FRAME_LIMIT)
    await client.connect()
    handle = await open_handle(client)
    await open_handle(client)
    polling = asyncio.create_task(
        STREAM_NEXT.call(client, StreamNextRequest(handle=handle, wait=30))
    )
    await asyncio.sleep(0.05)
    assert endpoint.open_streams == 2
    await client.close()
    with pytest.raises(EndpointUnavailable):  # the client failed it when it closed
        await polling
    await wait_until(lambda: endpoint.open_streams == 0, message="handles released")


async def test_an_idle_handle_is_closed_and_the_subscription_opens_again_at_its_cursor(
    engine: Engine, short_tmp: Path
) -> None:
    endpoint = await serving(engine, short_tmp / "i.sock", stream_idle_timeout=0.1)
    try:
        async with LocalClient(endpoint.path) as client:
            subscription = await EndpointSubscription.open(client, "ev", "g", after=0)
            await engine.append("ev", "g", "a")
            assert (await subscription.__anext__()).data == "a"
            await wait_until(lambda: endpoint.open_streams == 0, message="the idle handle closed")
            await engine.append("ev", "g", "b")
            record = await asyncio.wait_for(subscription.__anext__(), 10)
            assert (record.seq, record.data) == (2, "b")
            assert endpoint.open_streams == 1
            await subscription.aclose()
            assert endpoint.open_streams == 0
    finally:
        await endpoint.close()


async def test_a_read_cancelled_mid_poll_loses_nothing(engine: Engine, client: LocalClient) -> None:
    subscription = await EndpointSubscription.open(client, "ev", "g", after=0)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(subscription.__anext__(), 0.05)
    await engine.publish("ev", "g", "live")
    await engine.append("ev", "g", "stored")
    first = await asyncio.wait_for(subscription.__anext__(), 10)
    second = await asyncio.wait_for(subscription.__anext__(), 10)
    assert [(first.data, first.live), (second.data, second.live)] == [
        ("live", True),
        ("stored", False),
    ]
    await subscription.aclose()
