"""Replicas of one scripted provider answer as one: the cursors live on the engine (embedded here;
several processes on NATS: ``tests/nats/test_scripted_replicas.py``)."""

from __future__ import annotations

from typing import Any

from tackroom.engine import open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.runtime.worker import WorkerSpec
from tackroom.testing import collect_stream
from tackroom.testing.engines import MEMORY_URL
from tackroom.testing.scripted import status_function
from tackroom.testing.scripted.worker import WORKER, ScriptedConfig
from tests.testing.helpers import request

REPLICA = WorkerSpec(
    name="scripted-replica",
    description="A second scripted worker under the same provider name: a replica.",
    config_model=ScriptedConfig,
    start=WORKER.start,
)
TURNS = [{"text": f"turn {n}"} for n in range(1, 5)]


def replicas(first: dict[str, Any], second: dict[str, Any] | None = None) -> Host:
    """Two scripted workers serving ``provider::scripted::*`` on one engine, in turn."""
    config = HarnessConfig(
        schema_version=1,
        worker_config={"scripted": first, "scripted-replica": second or first},
    )
    return Host(engine=open_engine(MEMORY_URL), workers=[WORKER, REPLICA], config=config)


async def texts(host: Host, calls: int, *, session_id: str | None = "s-1") -> list[str]:
    return [
        (await collect_stream(host.engine, "scripted", request(session_id=session_id))).text
        for _ in range(calls)
    ]


async def test_replicas_share_a_per_session_cursor() -> None:
    async with replicas({"script": TURNS, "per_session": True}) as host:
        assert await texts(host, 4) == ["turn 1", "turn 2", "turn 3", "turn 4"]
        assert await texts(host, 2, session_id="s-2") == ["turn 1", "turn 2"]


async def test_replicas_share_the_shared_sequence() -> None:
    async with replicas({"script": TURNS}) as host:
        assert await texts(host, 4) == ["turn 1", "turn 2", "turn 3", "turn 4"]
        extra = await collect_stream(host.engine, "scripted", request())
        assert extra.error is not None
        assert "call 5" in extra.error["message"]
        statuses = [await host.engine.trigger(status_function("scripted")) for _ in range(2)]
        # Whichever replica answers, every turn was replayed; each reports its own violations.
        assert all(status["remaining"] == [] for status in statuses)


async def test_replicas_with_different_scripts_are_a_violation_not_a_mixed_answer() -> None:
    other = [{"text": f"other {n}"} for n in range(1, 5)]
    async with replicas({"script": TURNS}, {"script": other}) as host:
        first = await collect_stream(host.engine, "scripted", request())
        second = await collect_stream(host.engine, "scripted", request())
    assert first.text == "turn 1"
    assert second.error is not None
    assert "different scripts" in second.error["message"]
