"""Processes that create a ``replicas=3`` namespace at the same moment must all start.

Found by ``bench/scale.py`` starting two harness processes at once on a fresh namespace of a
3-node cluster: one of them exited at start with ``EngineUnavailable: no JetStream stream stores
'$KV.<namespace>_meta.namespace'`` (``NatsEngine._provision`` → ``link.js_publish``). The other
process had just created the replicated ``_meta`` bucket, which takes writes only once its
replicas have elected a leader; a publish before that finds no responder, and the start gives up
at once instead of waiting for the bucket it was told exists.

A publish that finds no responder on a replicated namespace is now asked again until the
leader is there (nothing was stored, so it cannot duplicate).

The reproduction: three engines on one fresh ``replicas=3`` namespace of a 3-node cluster,
started together (three times, on three namespaces); every start must succeed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tackroom.engine import open_engine
from tackroom.testing.nats import NatsCluster, nats_cluster

from .report import SOAK

pytestmark = pytest.mark.timeout(3600 if SOAK else 90)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    with nats_cluster(store_dir=tmp_path / "cluster") as started:
        yield started


async def test_processes_creating_a_replicated_namespace_at_once_all_start(
    cluster: NatsCluster,
) -> None:
    for attempt in range(3):
        url = f"{cluster.url}?namespace=fresh{attempt}&replicas=3"
        engines = [open_engine(url) for _ in range(3)]
        try:
            await asyncio.gather(*(engine.start() for engine in engines))
        finally:
            for engine in engines:
                with contextlib.suppress(Exception):
                    await engine.close()
