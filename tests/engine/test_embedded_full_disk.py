"""A full disk on the embedded engine: a delivery it failed is retried on the backoff schedule,
said in one warning line, and never waits out the visibility timeout or the dead letters."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import EngineStorageError, QueueConfig, current_invocation
from tackroom.engine.embedded import EmbeddedEngine
from tackroom.engine.embedded.store import Store
from tackroom.testing import wait_until

QUICK = QueueConfig(
    max_deliveries=2, visibility_timeout=30.0, backoff_initial=0.02, backoff_max=0.1
)
BIG = "x" * 20_000  # needs new pages: fails once the database may not grow


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[EmbeddedEngine]:
    async with EmbeddedEngine(path=tmp_path / "engine.db") as started:
        await started.configure_queue("q", QUICK)
        yield started


def _store(engine: EmbeddedEngine) -> Store:
    store = engine._store
    assert store is not None
    return store


def _fill(engine: EmbeddedEngine, full: bool) -> None:
    """The database may not grow (SQLite answers SQLITE_FULL), or may again."""
    db = _store(engine)._db
    db.execute(f"PRAGMA max_page_count={1 if full else 1 << 30}")


def _failing_while(full: Callable[[], bool], method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if full():
            raise EngineStorageError("engine database engine.db: the disk is full")
        return method(*args, **kwargs)

    return wrapper


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING]


def _pending(engine: EmbeddedEngine) -> int:
    row = _store(engine)._db.execute("SELECT COUNT(*) FROM messages").fetchone()
    return int(row[0])


async def test_a_step_that_hit_a_full_disk_is_retried_until_space_is_back(
    engine: EmbeddedEngine, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[int] = []

    async def step(payload: Any) -> None:
        invocation = current_invocation()
        assert invocation is not None
        attempts.append(invocation.attempt)
        await engine.set_state("s", "k", BIG)

    await engine.enqueue("t::step", {}, queue="q")
    _fill(engine, full=True)
    await engine.register_function("t::step", step)
    # More failures than max_deliveries: a full disk is not the step's fault.
    await wait_until(lambda: len(attempts) > QUICK.max_deliveries, timeout=5)
    _fill(engine, full=False)

    await wait_until(lambda: _pending(engine) == 0, timeout=5)
    assert await engine.list_dead_letters("q") == []
    entry = await engine.get_state("s", "k")
    assert entry is not None
    retried = [r for r in _warnings(caplog) if "t::step" in r.getMessage()]
    assert retried
    for record in retried:
        assert record.exc_info is None
        assert "disk is full" in record.getMessage()
        assert "retrying in" in record.getMessage()


async def test_a_failure_the_store_cannot_record_is_retried_on_the_backoff_schedule(
    engine: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(engine)
    full = True
    monkeypatch.setattr(store, "retry_later", _failing_while(lambda: full, store.retry_later))
    calls: list[float] = []

    async def step(payload: Any) -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RuntimeError("the first attempt fails")

    await engine.register_function("t::step", step)
    await engine.enqueue("t::step", {}, queue="q")
    await wait_until(lambda: len(calls) == 1)
    await asyncio.sleep(0.3)
    full = False

    await wait_until(lambda: len(calls) == 2, timeout=5)  # not after the 30 s lease
    await wait_until(lambda: _pending(engine) == 0)
    assert any("could not record" in r.getMessage() for r in _warnings(caplog))
    assert all(r.exc_info is None for r in _warnings(caplog))


async def test_a_success_the_store_cannot_record_is_recorded_once_it_can(
    engine: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(engine)
    full = True
    monkeypatch.setattr(store, "ack", _failing_while(lambda: full, store.ack))
    calls: list[Any] = []

    async def step(payload: Any) -> None:
        calls.append(payload)

    await engine.register_function("t::step", step)
    await engine.enqueue("t::step", {}, queue="q")
    await wait_until(lambda: len(calls) == 1)
    await asyncio.sleep(0.3)
    full = False

    await wait_until(lambda: _pending(engine) == 0, timeout=5)
    assert len(calls) == 1


async def test_a_dispatcher_that_cannot_lease_says_so_in_one_line(
    engine: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(engine)
    full = True
    monkeypatch.setattr(store, "lease", _failing_while(lambda: full, store.lease))
    calls: list[Any] = []

    async def step(payload: Any) -> None:
        calls.append(payload)

    await engine.register_function("t::step", step)
    await engine.enqueue("t::step", {}, queue="q")
    await wait_until(lambda: bool(_warnings(caplog)))
    await asyncio.sleep(1.5)  # the dispatcher tries again meanwhile, and says nothing more
    full = False

    await wait_until(lambda: len(calls) == 1, timeout=5)
    stalled, resumed = _warnings(caplog)
    assert stalled.exc_info is None
    assert "stalled" in stalled.getMessage()
    assert "disk is full" in stalled.getMessage()
    assert "resumed" in resumed.getMessage()
