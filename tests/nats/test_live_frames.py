"""NATS live frames: a frame that overtakes the stored record it follows waits for it.

A live frame travels on core NATS, a stored record through the stream's ordered consumer: two
subscriptions with no order between them. Here the frame is sent first, on the wire, naming
records not yet appended, so the subscription must hold it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tackroom.engine.nats import NatsEngine
from tackroom.testing import running_engine, take
from tackroom.testing.nats import nats_test_url


async def test_a_frame_waits_for_the_record_its_publisher_appended_before(
    tmp_path: Path,
) -> None:
    async with running_engine(nats_test_url(tmp_path)) as engine:
        assert isinstance(engine, NatsEngine)
        subscription = await engine.subscribe("chat", "s1")
        try:
            body = {"schema_version": 1, "after": 2, "ts": time.time(), "data": "late"}
            await engine.publish("chat", "s1", "early")  # this process appended nothing yet
            nc = engine._parts.link.nc  # type: ignore[union-attr]  # the raw wire, on purpose
            await nc.publish(engine.names.live_subject("chat", "s1"), json.dumps(body).encode())
            await nc.flush()
            await engine.append("chat", "s1", {"i": 1})
            await engine.append("chat", "s1", {"i": 2})
            records = await take(subscription, 4)
        finally:
            await subscription.aclose()
    assert [(r.live, r.seq, r.data) for r in records] == [
        (True, 0, "early"),
        (False, 1, {"i": 1}),
        (False, 2, {"i": 2}),
        (True, 2, "late"),
    ]
