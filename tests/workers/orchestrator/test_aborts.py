"""The abort watch: a request made through one process is known, from memory, to the process
driving the run; the driver reads the request's state once per delivery, not once per step;
nothing of a notice is stored."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import Engine
from tackroom.testing import Script, running_engine, wait_until
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.workers.orchestrator.aborts import ABORT_SCOPE, ABORTS, AbortWatch

from ...turn.harness import record_call, running_harness, wait_for_terminal


@contextlib.asynccontextmanager
async def following(watch: AbortWatch) -> AsyncIterator[AbortWatch]:
    task = asyncio.create_task(watch.follow())
    try:
        yield watch
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def two_processes(backend: str, tmp_path: Path) -> AsyncIterator[tuple[Engine, Engine]]:
    """Two engine connections as two processes have them (embedded: one process, one engine)."""
    url = engine_url_for(backend, tmp_path)
    async with running_engine(url) as first:
        if backend == "embedded":
            yield first, first
            return
        async with running_engine(url) as second:
            yield first, second


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_request_made_elsewhere_reaches_the_watch_of_the_driving_process(
    backend: str, tmp_path: Path
) -> None:
    async with (
        two_processes(backend, tmp_path) as (driving, serving),
        following(AbortWatch(driving)) as watch,
    ):
        await asyncio.wait_for(watch.following.wait(), timeout=10)
        await AbortWatch(serving).request("s1", "run-a", "user pressed stop")

        await wait_until(lambda: watch.requested("s1", "run-a"), timeout=10)
        assert not watch.requested("s1", "run-b")  # another run of the session is not
        assert await watch.reason("s1", "run-a") == "user pressed stop"
        watch.forget("s1")
        assert not watch.requested("s1", "run-a")
        assert await watch.reason("s1", "run-a") is None
        assert await serving.read(ABORTS.name, "all") == []  # live only: no ids kept


async def test_a_delivery_learns_an_earlier_request_from_the_state(tmp_path: Path) -> None:
    async with running_engine(engine_url_for("embedded", tmp_path)) as engine:
        await engine.set_state(ABORT_SCOPE, "s1", {"run_id": "run-a", "reason": None})
        watch = AbortWatch(engine)  # a process that started after the request: no notice
        assert not watch.requested("s1", "run-a")
        await watch.load("s1")
        assert watch.requested("s1", "run-a")
        assert await watch.reason("s1", "run-a") == "aborted"


async def test_the_watch_keeps_a_bounded_number_of_sessions(tmp_path: Path) -> None:
    async with running_engine(engine_url_for("embedded", tmp_path)) as engine:
        watch = AbortWatch(engine)
        for n in range(10_050):
            watch.note(f"s{n}", "run")
        assert not watch.requested("s0", "run")
        assert watch.requested("s10049", "run")


async def test_a_turn_reads_the_abort_state_once_per_delivery_not_per_step(
    tmp_path: Path,
) -> None:
    script = Script([{"tool_calls": [record_call("rec", "n1")]}, {"text": "done"}])
    async with running_harness(tmp_path, script) as harness:
        reads: Counter[str] = Counter()
        get_state = harness.engine.get_state

        async def counted(scope: str, key: str) -> Any:
            reads[scope] += 1
            return await get_state(scope, key)

        harness.engine.get_state = counted  # type: ignore[method-assign]  # a counting spy
        await harness.start("s", "record", run_id="run")
        record = await wait_for_terminal(harness, "s")
        assert record.stop_reason == "end"
        assert record.step >= 5  # provisioning, model, tools, steering, model, steering
        assert reads[ABORT_SCOPE] == 1
