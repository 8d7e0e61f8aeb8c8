"""Token deltas are live only: a client that follows a run mid-answer gets a snapshot of the
message so far, then the deltas after it, and the stored stream holds no delta (both backends)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tackroom import Harness, MessageSnapshot
from tackroom.contracts.events import EVENTS
from tackroom.engine import open_engine
from tackroom.testing import HeldSleep, ScriptedProvider, wait_until
from tackroom.testing.backends import BACKENDS, engine_url_for
from tests.harness.live_checks import assert_joined_mid_answer

ANSWER = "one two three four five six"


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_following_mid_answer_gives_a_snapshot_then_the_rest(
    backend: str, tmp_path: Path
) -> None:
    held = HeldSleep(at=4)  # the start frame and three words went out: the model pauses
    script = [{"text": ANSWER, "deltas": "words", "delay_between_frames": 0.001}]
    provider = ScriptedProvider(script, sleep=held)
    engine = open_engine(engine_url_for(backend, tmp_path))
    async with Harness(provider, engine=engine, home=tmp_path) as harness:
        started = await harness.submit("count", session="s1")
        await asyncio.wait_for(held.reached.wait(), 10)

        async def flushed() -> bool:  # the coalescer's timer sent what streamed before the pause
            taken = await engine.snapshot(EVENTS.name, "s1")
            return bool(taken) and "three" in str(taken[0].data)

        await wait_until(flushed, message="the deltas before the pause went out")
        run = await harness.follow("s1")
        events = []
        async with asyncio.timeout(20):  # without a snapshot the model would wait for ever
            async for event in run:
                events.append(event)
                if isinstance(event, MessageSnapshot):
                    held.release.set()  # the rest streams to a client that holds the snapshot
        stored = await engine.read(EVENTS.name, "s1")

    assert run.run_id == started.run_id
    assert run.result.output == ANSWER
    assert_joined_mid_answer(events, ANSWER, held="one two three")
    # the stored stream: the finished message, no delta, no snapshot
    kinds = [r.data["type"] for r in stored]
    assert "message_complete" in kinds
    assert not {"message_update", "message_snapshot"} & set(kinds)
    assert kinds[-1] == "agent_end"
