"""Group commit on the embedded engine: writers ready together share one SQLite transaction,
each keeps its all-or-nothing, and a failure or a crash in the middle writes nothing of the
batch. Commits are counted with sqlite3's trace callback on the engine's own connection."""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import EngineStorageError, RevisionConflict
from tackroom.engine.embedded import EmbeddedEngine
from tackroom.engine.embedded.store import Store

from .group_commit_child import CRASH_CODE

CHILD = Path(__file__).with_name("group_commit_child.py")


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[EmbeddedEngine]:
    async with EmbeddedEngine(path=tmp_path / "engine.db") as started:
        yield started


def _store(engine: EmbeddedEngine) -> Store:
    store = engine._store
    assert store is not None
    return store


@contextmanager
def traced(engine: EmbeddedEngine) -> Iterator[list[str]]:
    """The SQL statements the engine runs meanwhile, first words upper-cased."""
    statements: list[str] = []
    db = _store(engine)._db
    db.set_trace_callback(lambda sql: statements.append(sql.split("(", 1)[0].strip().upper()))
    try:
        yield statements
    finally:
        db.set_trace_callback(None)


def _count(statements: list[str], verb: str) -> int:
    return sum(1 for s in statements if s.startswith(verb))


async def _together(
    count: int, body: Callable[[int, asyncio.Event], Coroutine[Any, Any, None]]
) -> list[Any]:
    """``body(i, gate)`` for each ``i`` at once; the gate opens when all wait on it."""
    gate = asyncio.Event()
    tasks = [asyncio.create_task(body(i, gate)) for i in range(count)]
    await asyncio.sleep(0.01)
    gate.set()
    return await asyncio.gather(*tasks, return_exceptions=True)


async def test_blocks_ending_together_share_one_commit_and_each_stays_whole(
    engine: EmbeddedEngine,
) -> None:
    count, loser = 50, 13
    stored = [await engine.set_state("t", f"k{i}", "before") for i in range(count)]
    # Lands after the loser read its key and before the batch: its compare-and-set fails there.
    interfere = asyncio.Event()

    async def block(index: int, gate: asyncio.Event) -> None:
        async with engine.transaction():
            await engine.set_state(
                "t", f"k{index}", "mine", expected_revision=stored[index].revision
            )
            await engine.append("s", f"g{index}", index)
            await engine.enqueue("test::nobody", index, queue="q")
            if index == loser:
                interfere.set()
            await gate.wait()

    async def other_writer() -> None:
        await interfere.wait()
        await engine.set_state("t", f"k{loser}", "other")

    writer = asyncio.create_task(other_writer())
    await asyncio.sleep(0)
    with traced(engine) as statements:
        outcomes = await _together(count, block)
    await writer

    assert _count(statements, "COMMIT") == 2  # the other writer's, then the batch
    assert isinstance(outcomes[loser], RevisionConflict)
    assert [o for i, o in enumerate(outcomes) if i != loser] == [None] * (count - 1)
    rows = _store(engine)._db.execute("SELECT COUNT(*) FROM messages").fetchone()
    assert rows[0] == count - 1
    for index in range(count):
        entry = await engine.get_state("t", f"k{index}")
        assert entry is not None
        assert entry.value == ("other" if index == loser else "mine")
        assert len(await engine.read("s", f"g{index}")) == (0 if index == loser else 1)


async def test_plain_writes_ready_together_share_a_commit(engine: EmbeddedEngine) -> None:
    async def write(index: int, gate: asyncio.Event) -> None:
        await gate.wait()
        await engine.set_state("t", f"k{index}", index)
        await engine.append("s", "g", index)

    with traced(engine) as statements:
        outcomes = await _together(50, write)
    assert outcomes == [None] * 50
    assert _count(statements, "COMMIT") == 2  # the 50 state writes, then the 50 appends
    assert sorted(r.data for r in await engine.read("s", "g")) == list(range(50))


async def test_a_lone_writer_is_written_at_once(engine: EmbeddedEngine) -> None:
    """Nothing else is ready to run: the write does not wait a loop turn for company."""
    await asyncio.sleep(0.01)  # the engine's own start-up work is done
    write = engine.set_state("t", "k", 1)
    with pytest.raises(StopIteration) as done:
        write.send(None)  # finished without suspending once
    assert done.value.value.value == 1
    assert await engine.get_state("t", "k") is not None


async def test_the_last_writer_to_join_writes_the_batch_at_once(engine: EmbeddedEngine) -> None:
    """Only the batch's own callback is left to run: nobody else can join, so the writer that
    comes then writes the batch with it, without waiting for the loop turn."""
    await asyncio.sleep(0.01)
    with traced(engine) as statements:
        first = asyncio.create_task(engine.set_state("t", "a", 1))
        await asyncio.sleep(0)  # it opened a batch: this task was ready to run
        write = engine.set_state("t", "b", 2)
        with pytest.raises(StopIteration):
            write.send(None)
        await first
    assert _count(statements, "COMMIT") == 1
    assert [e.key for e in await engine.list_state("t")] == ["a", "b"]


async def test_a_compare_and_set_that_fails_takes_no_write_lock(engine: EmbeddedEngine) -> None:
    """Its check reads in a deferred transaction, which no write upgrades: nothing to commit."""
    stored = await engine.set_state("t", "k", 1)
    with traced(engine) as statements:
        with pytest.raises(RevisionConflict):
            await engine.set_state("t", "k", 2, expected_revision=stored.revision + 1)
        with pytest.raises(RevisionConflict):
            await engine.delete_state("t", "k", expected_revision=0)
    assert _count(statements, "BEGIN IMMEDIATE") == 0
    assert _count(statements, "COMMIT") == 0
    assert _count(statements, "INSERT") + _count(statements, "DELETE") == 0


async def test_a_storage_failure_mid_batch_writes_nothing_of_it(
    engine: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await engine.set_state("t", "before", 1)
    db = _store(engine)._db
    execute = db.execute
    inserts = 0

    def failing(sql: str, parameters: Any = (), /) -> Any:
        nonlocal inserts
        if sql.startswith("INSERT"):
            inserts += 1
            if inserts == 12:  # past the first units' writes, within the batch
                raise EngineStorageError("engine database engine.db: the disk is full")
        return execute(sql, parameters)

    async def block(index: int, gate: asyncio.Event) -> None:
        async with engine.transaction():
            await engine.set_state("t", f"k{index}", index)
            await engine.append("s", f"g{index}", index)
            await gate.wait()

    monkeypatch.setattr(db, "execute", failing)
    outcomes = await _together(10, block)
    monkeypatch.undo()

    assert all(isinstance(o, EngineStorageError) for o in outcomes)
    assert [e.key for e in await engine.list_state("t")] == ["before"]
    for index in range(10):
        assert await engine.read("s", f"g{index}") == []
    assert not db.in_transaction
    # The engine goes on: the same writes work now, and sequences did not skip.
    await engine.append("s", "g0", "again")
    assert [r.seq for r in await engine.read("s", "g0")] == [1]


async def test_a_crash_mid_batch_leaves_every_writer_of_it_unwritten(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), str(path), "8", "10", stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await asyncio.wait_for(child.communicate(), 30)
    assert child.returncode == CRASH_CODE, stderr.decode()

    async with EmbeddedEngine(path=path) as engine:
        assert [e.key for e in await engine.list_state("t")] == ["before"]
        assert [r.data for r in await engine.read("s", "before")] == [1]
        for index in range(8):
            assert await engine.read("s", f"g{index}") == []
        rows = _store(engine)._db.execute("SELECT COUNT(*) FROM messages").fetchone()
        assert rows[0] == 0


@pytest.mark.parametrize("cancelled", [0, 1], ids=["the-first-writer", "a-later-writer"])
async def test_a_writer_cancelled_before_its_batch_writes_nothing(
    engine: EmbeddedEngine, cancelled: int
) -> None:
    """A writer cancelled while its batch waits for its loop turn is left out of it (the first
    writer, which opened the batch, as any other); the others are written."""
    writers = [asyncio.create_task(engine.set_state("t", f"k{i}", i)) for i in range(3)]
    await asyncio.sleep(0)  # all three have reached the batch, which is not written yet
    writers[cancelled].cancel()
    for index, writer in enumerate(writers):
        if index == cancelled:
            with pytest.raises(asyncio.CancelledError):
                await writer
        else:
            await writer
    kept = [e.key for e in await engine.list_state("t")]
    assert kept == [f"k{i}" for i in range(3) if i != cancelled]


async def test_a_plain_write_in_a_unit_reads_nothing(engine: EmbeddedEngine) -> None:
    """A write with no expected revision needs none: no read before the commit."""
    await engine.set_state("t", "k", 1)
    with traced(engine) as statements:
        async with engine.transaction():
            await engine.set_state("t", "k", 2)
            await engine.set_state("t", "new", 3)
    assert _count(statements, "SELECT") == 0
    assert (await engine.get_state("t", "k")).value == 2  # type: ignore[union-attr]


async def test_a_unit_comparing_its_own_blind_write_is_not_failed_by_an_earlier_value(
    engine: EmbeddedEngine,
) -> None:
    """Written blind, then compared against that write, then changed outside before the unit
    commits: the unit's outcome depends on nothing it read, so it commits whole (as if after
    the outside write)."""
    await engine.set_state("t", "k", "before")
    async with engine.transaction():
        blind = await engine.set_state("t", "k", "blind")
        await engine.set_state("t", "k", "compared", expected_revision=blind.revision)
        with pytest.raises(RevisionConflict):
            await engine.set_state("t", "k", "stale", expected_revision=blind.revision)
        outside = asyncio.create_task(
            engine.set_state("t", "k", "outside"), context=contextvars.Context()
        )
        await asyncio.sleep(0.01)
        assert outside.done()
    entry = await engine.get_state("t", "k")
    assert entry is not None
    assert entry.value == "compared"


async def test_a_compare_after_a_read_still_fails_when_changed_outside(
    engine: EmbeddedEngine,
) -> None:
    stored = await engine.set_state("t", "k", "before")

    async def unit() -> None:
        async with engine.transaction():
            await engine.set_state("t", "k", "mine", expected_revision=stored.revision)
            outside = asyncio.create_task(
                engine.set_state("t", "k", "outside"), context=contextvars.Context()
            )
            await asyncio.sleep(0.01)
            assert outside.done()

    with pytest.raises(RevisionConflict):
        await unit()
    entry = await engine.get_state("t", "k")
    assert entry is not None
    assert entry.value == "outside"
