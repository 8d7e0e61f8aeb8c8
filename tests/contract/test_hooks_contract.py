"""The hooks contract suite against the ``hooks`` worker this package ships, on the embedded
engine and on a real NATS server, where compare-and-set is over the network."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tackroom.engine import Engine, open_engine
from tackroom.runtime import Host, load_worker
from tackroom.testing.contracts import HooksContract
from tackroom.testing.nats import nats_test_url


class TestHooksWorker(HooksContract):
    worker_name = "hooks"


class TestHooksWorkerOnNats(HooksContract):
    worker_name = "hooks"

    @pytest.fixture
    async def bus(self, tmp_path: Path) -> AsyncIterator[Engine]:
        engine = open_engine(nats_test_url(tmp_path))
        async with Host(engine=engine, workers=[load_worker(self.worker_name)]) as host:
            yield host.engine
