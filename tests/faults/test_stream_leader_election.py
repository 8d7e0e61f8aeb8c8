"""A stream that cannot take writes for a few seconds while the queue works must not strand a run.

Found by the cluster's node kill (``test_nats_cluster.py``): when the SIGKILLed node led the
replicated stream of ``agent::events`` (``replicas=3``), appends failed with ``no JetStream
stream stores 'faults.ev.agent=3A=3Aevents.s2'`` until the two others elected a new leader
(NATS waits several seconds before it does), while the ``turn-step`` queue, led by another node,
kept delivering. Each delivery of the step failed with that ``EngineUnavailable``; on NATS such
failures count toward the queue's ``max_deliveries`` (5 for ``turn-step``, about 6.6 s of
backoff), so the step was dead-lettered and the run stayed ``assistant_streaming`` for good (the
loop waited 240 s). On the embedded engine a delivery the engine failed is never dead-lettered:
the run goes on once the engine is back.

Fixed: only an engine that is away fails a ``turn-step`` delivery, so the queue now allows 50
deliveries (backoff doubling to 10 s: minutes of outage) before it dead-letters the step.

The reproduction is deterministic: the harness runs on an engine whose ``append`` answers
``EngineUnavailable`` for 8 s from the model call on (what a stream without a leader answers),
everything else untouched; the run must end ``stopped``/``end`` once appends work again.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import EngineUnavailable, open_engine
from tackroom.testing import Script
from tackroom.testing.backends import engine_url_for
from tackroom.testing.faults import FaultyEngine
from tests.turn.harness import running_harness, wait_for_state, wait_for_terminal

from .report import SOAK

pytestmark = pytest.mark.timeout(3600 if SOAK else 90)

SESSION = "leaderless-session"
AWAY = 8.0
"""Seconds appends fail: more than ``turn-step``'s five deliveries take (backoff 0.2 s doubling,
±20 %, and each delivery calls the model again: the fifth fails 4-5 s after the first)."""


class StreamsAway(FaultyEngine):
    """An engine whose appends fail, as a stream without a leader does, until ``back_at``."""

    back_at = 0.0

    async def append(self, stream: str, group_id: str, data: Any) -> int:
        if time.monotonic() < self.back_at:
            raise EngineUnavailable(f"no JetStream stream stores {stream!r} (injected)")
        return await self.inner.append(stream, group_id, data)


@pytest.mark.parametrize(
    "backend",
    [
        "embedded",
        "nats",
    ],
)
async def test_a_run_outlives_appends_failing_for_a_few_seconds(
    backend: str, tmp_path: Path
) -> None:
    script = Script([{"text": "Hello there.", "delay": 0.1}])
    engine = StreamsAway(open_engine(engine_url_for(backend, tmp_path)), retry_backoff=None)
    async with running_harness(tmp_path, script, engine=engine) as harness:
        reply = await harness.start(SESSION, "hi")
        assert reply.started
        await wait_for_state(harness, SESSION, "assistant_streaming")
        engine.back_at = time.monotonic() + AWAY
        await asyncio.sleep(AWAY)
        view = await wait_for_terminal(harness, SESSION, timeout=10)
    assert (view.state, view.stop_reason) == ("stopped", "end"), view
