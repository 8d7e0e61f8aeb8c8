"""A step delivered twice at once (at least once: a lease that lapsed during a NATS restart) must
not add events to a run that has ended.

Found by the cluster's rolling restart (``test_nats_cluster.py``): a session's
``agent::events`` ended with ``agent_end`` and then one more ``message_update`` of the last
model call, under another stream id. The step of that model call had been delivered again while
its first delivery still ran (the first delivery's lease renewals failed while a node restarted).
Both deliveries called the model; the first committed the step and ended the run; the second,
whose commit then failed on the record's revision, had already streamed a delta — after
``agent_end``. A client following the run stops at ``agent_end``; one that reads the stream
(or reconnects) sees an event of a run that is over.

The reproduction is deterministic: the model answers after 1 s; half-way through, the test
triggers ``turn::step`` for the same run a second time, as the redelivery does. The driver now
lets one delivery of a session work at a time in a process: the second waits, then finds the
run ended. Deltas are now live only (never stored), so a second delivery's deltas could not
land in the stored stream at all; the lock still keeps it from calling the model beside the
first. (A redelivery that lands in another process while the first still runs: see
docs/workers/orchestrator.md.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tackroom.contracts.turn import TURN_STEP
from tackroom.testing import Script
from tackroom.testing.backends import BACKENDS, engine_url_for
from tests.turn.harness import events_of, running_harness, wait_for_state, wait_for_terminal

from .report import SOAK

pytestmark = pytest.mark.timeout(3600 if SOAK else 60)

SESSION = "dup-session"
RUN_ID = "run-dup"
THINK = 1.0


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_step_delivered_twice_adds_no_event_after_the_end(
    backend: str, tmp_path: Path
) -> None:
    script = Script([{"text": "Hello there.", "delay": THINK}])
    url = engine_url_for(backend, tmp_path)
    async with running_harness(tmp_path, script, url=url) as harness:
        reply = await harness.start(SESSION, "hi", run_id=RUN_ID)
        assert reply.started
        await wait_for_state(harness, SESSION, "assistant_streaming")
        await asyncio.sleep(THINK / 2)  # the first delivery is waiting for the model
        duplicate = asyncio.create_task(
            harness.engine.trigger(TURN_STEP, {"session_id": SESSION, "run_id": RUN_ID}, timeout=30)
        )
        view = await wait_for_terminal(harness, SESSION)
        await asyncio.gather(duplicate, return_exceptions=True)
        events = await events_of(harness.engine, SESSION)

    assert (view.state, view.stop_reason) == ("stopped", "end")
    types = [record.data["type"] for record in events]
    assert types.count("agent_end") == 1
    assert types[-1] == "agent_end", types[types.index("agent_end") :]
