"""The NATS server SIGKILLed and restarted mid-run, and short outages: every run ends ``end``.

A harness process (``workload.py loop``) runs sessions of the multi-tool turn, a few at a time,
on a ``nats-server`` of the test's own (JetStream on a store directory, so it restarts on the same
port and data). Meanwhile the server is SIGKILLed and started again after a while, or stopped for
0.1-0.6 s several times. The loop retries a start or a poll the bus could not answer, with the
same run id; the turns themselves ride through on the orchestrator's queue. Then every session is
counted (:mod:`.checks`): each run ended ``stopped``/``end`` with the entries of an uninterrupted
run, no non-idempotent side effect twice, no call answered as done that never ran (a call the
outage interrupted is answered to the model as an error, and counted), events gap-free.

Short mode: one server kill and one trial of three short outages, seeded; ``TACKROOM_SOAK=1``:
10 of each, with more sessions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tackroom.testing.nats import NatsServer, nats_server

from .loops import loop_trial
from .procs import Child
from .report import SOAK, judge, record, rng, trials

pytestmark = pytest.mark.timeout(3600 if SOAK else 180)

SESSIONS = 16 if SOAK else 6
CONCURRENCY = 3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    with nats_server(store_dir=tmp_path / "nats") as started:
        yield started


def _url(server: NatsServer) -> str:
    return f"{server.url}?namespace=faults&heartbeat=0.5"


async def _restart_after(server: NatsServer, down: float) -> None:
    await asyncio.to_thread(server.stop, kill=True)
    await asyncio.sleep(down)
    await asyncio.to_thread(server.start)


@pytest.mark.parametrize("index", range(trials(1, 10)))
async def test_runs_ride_through_a_server_killed_and_restarted(
    server: NatsServer, tmp_path: Path, index: int
) -> None:
    rand = rng(f"nats-kill:{index}")

    async def fault(child: Child) -> int:
        await asyncio.sleep(rand.uniform(0.3, 1.5))
        await _restart_after(server, rand.uniform(0.5, 2.0))
        return 1

    tally = await loop_trial(
        _url(server), tmp_path, fault, sessions=SESSIONS, concurrency=CONCURRENCY
    )
    record("nats_server_sigkill", "nats", tally)
    judge(tally)
    assert tally.completed == SESSIONS


@pytest.mark.parametrize("index", range(trials(1, 10)))
async def test_runs_ride_through_short_outages(
    server: NatsServer, tmp_path: Path, index: int
) -> None:
    rand = rng(f"nats-outages:{index}")
    outages = 3 if not SOAK else rand.randint(3, 8)

    async def fault(child: Child) -> int:
        for _ in range(outages):
            await asyncio.sleep(rand.uniform(0.3, 1.0))
            await _restart_after(server, rand.uniform(0.1, 0.6))
        return outages

    tally = await loop_trial(
        _url(server), tmp_path, fault, sessions=SESSIONS, concurrency=CONCURRENCY
    )
    record("nats_short_outages", "nats", tally)
    judge(tally)
    assert tally.completed == SESSIONS
