"""A 3-node NATS cluster: a node SIGKILLed mid-run, then a rolling restart — runs go on.

Three ``nats-server`` processes on this machine, joined by routes, JetStream on each with a
store of its own (:class:`tackroom.testing.nats.NatsCluster`), the namespace at ``replicas=3``
(docs/nats.md). A harness process (``workload.py loop``, given every node in its URL) runs
sessions of the multi-tool turn with a slow model (1 s of think time a call), so runs are in
flight through every fault:

- one node, drawn at random, is SIGKILLed mid-run and started again on its ports and store;
- a rolling restart: each node in turn is stopped (SIGTERM), started, and the cluster waited
  for until healthy (``/healthz``: JetStream current) before the next.

Every session is then counted (:mod:`.checks`): each run ended ``stopped``/``end`` with the
entries of an uninterrupted run, no non-idempotent side effect twice, no call answered as done
that never ran, events gap-free.

A cluster run: ``make soak`` runs it (``TACKROOM_SOAK=1``: 5 trials of each with more
sessions), ``make test`` does not; ``TACKROOM_CLUSTER=1`` runs one trial of each.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tackroom.testing.nats import NatsCluster, nats_cluster

from .loops import loop_trial
from .procs import Child
from .report import SOAK, judge, record, rng, trials

pytestmark = [
    pytest.mark.timeout(3600 if SOAK else 240),
    pytest.mark.skipif(
        not SOAK and os.environ.get("TACKROOM_CLUSTER") != "1",
        reason="a 3-node cluster run: make soak runs it (or TACKROOM_CLUSTER=1)",
    ),
]

SESSIONS = 15 if SOAK else 9
CONCURRENCY = 3
THINK = 1.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    with nats_cluster(store_dir=tmp_path / "cluster") as started:
        yield started


def _url(cluster: NatsCluster) -> str:
    return f"{cluster.url}?namespace=faults&replicas=3"


@pytest.mark.parametrize("index", range(trials(1, 5)))
async def test_runs_ride_through_a_node_killed_and_restarted(
    cluster: NatsCluster, tmp_path: Path, index: int
) -> None:
    rand = rng(f"cluster-kill:{index}")

    async def fault(child: Child) -> int:
        await asyncio.sleep(rand.uniform(1.0, 4.0))
        node = rand.choice(cluster.nodes)
        await asyncio.to_thread(node.stop, kill=True)
        await asyncio.sleep(rand.uniform(0.5, 3.0))
        await asyncio.to_thread(node.start)
        await asyncio.to_thread(cluster.wait_healthy)
        return 1

    tally = await loop_trial(
        _url(cluster), tmp_path, fault, sessions=SESSIONS, concurrency=CONCURRENCY, think=THINK
    )
    record("nats_cluster_node_sigkill", "nats-cluster", tally)
    judge(tally)
    assert tally.completed == SESSIONS


@pytest.mark.parametrize("index", range(trials(1, 5)))
async def test_runs_ride_through_a_rolling_restart(
    cluster: NatsCluster, tmp_path: Path, index: int
) -> None:
    rand = rng(f"cluster-rolling:{index}")

    async def fault(child: Child) -> int:
        await asyncio.sleep(rand.uniform(0.5, 2.0))
        for node in cluster.nodes:
            await asyncio.to_thread(node.stop)
            await asyncio.to_thread(node.start)
            await asyncio.to_thread(cluster.wait_healthy)
        return len(cluster.nodes)

    tally = await loop_trial(
        _url(cluster), tmp_path, fault, sessions=SESSIONS, concurrency=CONCURRENCY, think=THINK
    )
    record("nats_cluster_rolling_restart", "nats-cluster", tally)
    judge(tally)
    assert tally.completed == SESSIONS
