"""The NATS connection dropping during a model call must not end the run in an error.

Found by the cluster's rolling restart (``test_nats_cluster.py``): when the node a harness is
connected to restarts, the client reconnects to another node at once, but runs whose
model call was in flight ended ``stopped``/``error`` with ``kind='transient' message='the model
call failed: the NATS connection dropped; the call may or may not have run'`` — two to four of
fifteen runs in each of five trials. An engine that is away is not the model's failure: any other
step the outage interrupts is retried once the bus is back, and the run ends ``end``.

The reproduction: a 3-node cluster (``replicas=3``), the harness given only the first node's
address (it learns the others from the server); the model answers after 2 s; 0.5 s into the model
call the first node is stopped (SIGTERM, as in a rolling restart), so the client's connection
drops while the call is in flight and it reconnects to another node; the node is started again
0.5 s later. (A single server stopped and started the same way does not end the run: the call
fails on the orchestrator's side and the step is retried.) Fixed: the model call's
``EngineUnavailable`` is no longer read as the model's transient failure; the step is retried.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tackroom.contracts.turn import TurnStateView
from tackroom.engine import EngineError
from tackroom.testing import Script
from tackroom.testing.nats import NatsCluster, nats_cluster
from tests.turn.harness import (
    RunningHarness,
    running_harness,
    wait_for_state,
    wait_for_terminal,
)

from .report import SOAK

pytestmark = pytest.mark.timeout(3600 if SOAK else 90)

SESSION = "outage-session"
THINK = 2.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    with nats_cluster(store_dir=tmp_path / "cluster") as started:
        yield started


async def test_a_connection_dropped_during_a_model_call_does_not_end_the_run(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    server = cluster.nodes[0]
    script = Script([{"text": "Hello there.", "delay": THINK}])
    url = f"{server.url}?namespace=outage&replicas=3"
    async with running_harness(tmp_path, script, url=url) as harness:
        reply = await harness.start(SESSION, "hi")
        assert reply.started
        await wait_for_state(harness, SESSION, "assistant_streaming")
        await asyncio.sleep(THINK / 4)  # the model call is in flight
        await asyncio.to_thread(server.stop)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(server.start)
        view = await _terminal(harness, SESSION)
    assert (view.state, view.stop_reason) == ("stopped", "end"), view


async def _terminal(harness: RunningHarness, session: str) -> TurnStateView:
    """The run's committed end, read again while the client is reconnecting."""
    async with asyncio.timeout(60):
        while True:
            try:
                return await wait_for_terminal(harness, session, timeout=60)
            except EngineError:
                await asyncio.sleep(0.1)
