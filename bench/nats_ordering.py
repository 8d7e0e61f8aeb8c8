"""What per-session (per-group) ordering costs on NATS at 10,000 live sessions; prints JSON.

    python bench/nats_ordering.py [--sessions N] [--partitions P] [--wait-ms MS]

Starts a ``nats-server`` of its own and measures, with its resident memory (RSS) from /proc:

- ``partitions`` (tackroom's design): one message in each of ``sessions`` groups, enqueued, then
  drained by one process whose handler waits ``wait_ms`` (a model call). The server holds
  ``partitions + 1`` consumers per (queue, function) whatever the number of sessions; at most
  ``partitions`` groups run at once (head-of-line blocking inside a partition).
- ``consumer_per_session`` (the alternative): one durable pull consumer per session
  (``filter_subject`` per session, ``max_ack_pending=1``), created for ``sessions`` sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import machine
from nats.js import api

import nats
from tackroom.engine import QueueConfig, open_engine
from tackroom.testing import wait_until
from tackroom.testing.nats import NatsServer, nats_server

QUEUE = "turns"


async def partitions_design(
    server: NatsServer, sessions: int, partitions: int, wait_ms: float
) -> dict[str, Any]:
    url = f"{server.url}?namespace=ordering&partitions={partitions}"
    handled = 0

    async def step(payload: Any) -> None:
        nonlocal handled
        await asyncio.sleep(wait_ms / 1000)
        handled += 1

    rss_before = server.rss_kib()
    producer = open_engine(url)
    await producer.start()
    start = time.perf_counter()
    for n in range(sessions):
        await producer.enqueue("turn::step", {"n": n}, queue=QUEUE, group=f"session-{n}")
    enqueue_s = time.perf_counter() - start
    rss_queued = server.rss_kib()
    await producer.close()

    worker = open_engine(url)
    await worker.start()
    try:
        await worker.configure_queue(QUEUE, QueueConfig(concurrency=256))
        start = time.perf_counter()
        await worker.register_function("turn::step", step)
        await wait_until(lambda: handled >= sessions, timeout=3600, interval=0.05)
        drain_s = time.perf_counter() - start
        rss_drained = server.rss_kib()
    finally:
        await worker.close()
    return {
        "consumers_on_server": partitions + 1,
        "enqueue_s": round(enqueue_s, 2),
        "enqueue_per_session_us": round(enqueue_s / sessions * 1e6, 1),
        "drain_s": round(drain_s, 2),
        "drain_msgs_per_s": round(sessions / drain_s, 1),
        "max_groups_in_parallel": partitions,
        "server_rss_kib": {"before": rss_before, "queued": rss_queued, "drained": rss_drained},
    }


async def consumer_per_session(server: NatsServer, sessions: int) -> dict[str, Any]:
    nc = await nats.connect(server.url)
    try:
        js = nc.jetstream()
        await js.add_stream(
            api.StreamConfig(
                name="PERSESSION",
                subjects=["persession.>"],
                retention=api.RetentionPolicy.WORK_QUEUE,
                max_consumers=sessions + 10,  # the server's default is 1000 per stream
            )
        )
        rss_before = server.rss_kib()
        start = time.perf_counter()
        for n in range(sessions):
            await js.add_consumer(
                "PERSESSION",
                api.ConsumerConfig(
                    durable_name=f"s{n}",
                    filter_subject=f"persession.s{n}",
                    ack_policy=api.AckPolicy.EXPLICIT,
                    max_ack_pending=1,
                ),
            )
        create_s = time.perf_counter() - start
        await asyncio.sleep(1)  # let the server settle before reading its memory
        rss_after = server.rss_kib()
    finally:
        await nc.close()
    delta = None if rss_before is None or rss_after is None else rss_after - rss_before
    return {
        "consumers_on_server": sessions,
        "create_s": round(create_s, 2),
        "create_per_consumer_ms": round(create_s / sessions * 1e3, 3),
        "server_rss_kib": {"before": rss_before, "after": rss_after},
        "rss_per_consumer_kib": None if delta is None else round(delta / sessions, 1),
        "note": "each worker process would also keep a pull request open per session",
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--wait-ms", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tackroom-ordering-") as tmp:
        with nats_server(store_dir=Path(tmp) / "a") as server:
            ours = await partitions_design(server, args.sessions, args.partitions, args.wait_ms)
        with nats_server(store_dir=Path(tmp) / "b") as server:
            alternative = await consumer_per_session(server, args.sessions)
    report = {
        "schema_version": 1,
        "benchmark": "nats_ordering",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "sessions": args.sessions,
        "partitions": args.partitions,
        "wait_ms": args.wait_ms,
        "machine": machine(),
        "results": {"partitions": ours, "consumer_per_session": alternative},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
