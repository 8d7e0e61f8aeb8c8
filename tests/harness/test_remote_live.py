"""A harness attached to a serving process through its local endpoint sees an answer stream:
live deltas while it streams, a snapshot when it follows mid-answer, handles released when it
goes."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tackroom import Harness, MessageSnapshot, MessageUpdate, UsageError
from tackroom.contracts.events import EVENTS
from tackroom.runtime import LocalEndpoint
from tackroom.testing import HeldSleep, ScriptedProvider, wait_until
from tests.harness.live_checks import assert_joined_mid_answer

ANSWER = "one two three four five six"
SCRIPT = [{"text": ANSWER, "deltas": "words", "delay_between_frames": 0.001}]


@dataclass
class Served:
    harness: Harness
    held: HeldSleep
    home: Path

    @property
    def endpoint(self) -> LocalEndpoint:
        endpoint = self.harness._host.endpoint if self.harness._host else None
        assert endpoint is not None
        return endpoint

    def client(self) -> Harness:
        return Harness("scripted:demo", home=self.home, attach=True)


@pytest.fixture
def home() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="tr-") as directory:  # a socket path is short
        yield Path(directory)


@pytest.fixture
async def served(home: Path) -> AsyncIterator[Served]:
    held = HeldSleep(at=4)  # the start frame and three words went out: the model pauses
    provider = ScriptedProvider(SCRIPT, sleep=held)
    async with Harness(provider, home=home, serve_endpoint=True) as harness:
        yield Served(harness, held, home)


async def test_an_attached_harness_sees_the_deltas_live(served: Served) -> None:
    async with served.client() as client:
        assert client.attached

        def late() -> int:
            return 1

        with pytest.raises(UsageError, match="register it before the harness starts"):
            client.register_tool(late)  # the serving process could never call it
        events = []
        async with asyncio.timeout(20):  # the model holds mid-answer until a delta came here
            async for event in client.stream("count", session="s1"):
                events.append(event)
                if isinstance(event, MessageUpdate):
                    served.held.release.set()
    updates = [e for e in events if isinstance(e, MessageUpdate) and e.data.kind == "text"]
    assert "".join(u.data.delta for u in updates) == ANSWER
    assert [u.data.index for u in updates] == sorted(u.data.index for u in updates)
    assert not [e for e in events if isinstance(e, MessageSnapshot)]  # subscribed from the start
    assert events[-1].type == "agent_end"


async def test_an_attached_client_joining_mid_answer_gets_a_snapshot_then_the_rest(
    served: Served,
) -> None:
    engine = served.harness.engine
    started = await served.harness.submit("count", session="s1")
    await asyncio.wait_for(served.held.reached.wait(), 10)

    async def flushed() -> bool:  # the coalescer's timer sent what streamed before the pause
        taken = await engine.snapshot(EVENTS.name, "s1")
        return bool(taken) and "three" in str(taken[0].data)

    await wait_until(flushed, message="the deltas before the pause went out")
    async with served.client() as client:
        run = await client.follow("s1")
        events = []
        async with asyncio.timeout(20):  # without a snapshot the model would wait for ever
            async for event in run:
                events.append(event)
                if isinstance(event, MessageSnapshot):
                    served.held.release.set()
    assert run.run_id == started.run_id
    assert run.result.output == ANSWER
    assert_joined_mid_answer(events, ANSWER, held="one two three")


async def test_a_client_that_goes_leaves_no_subscription_behind(served: Served) -> None:
    served.held.release.set()
    client = served.client()
    await client.start()
    stream = client.stream("count", session="s1")
    await stream.__anext__()  # subscribed in the serving process, a poll waiting there
    endpoint = served.endpoint
    assert endpoint.open_streams == 1
    await client.close()  # without closing the stream first
    await wait_until(lambda: endpoint.open_streams == 0, message="the handle was released")

    async with served.client() as again:  # a stream closed by its reader is released at once
        follow = await again.follow("s1")
        assert endpoint.open_streams == 1
        await follow.aclose()
        assert endpoint.open_streams == 0
