"""The event emitter on a real engine: an event and the records that go with it (its audit fact,
its ``agent::turn_end`` copy) are written together — one transaction on the embedded engine, in
that order on NATS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tackroom.contracts.audit import FACTS, FACTS_GROUP
from tackroom.contracts.events import (
    EVENTS,
    TURN_END,
    ErrorData,
    FunctionExecutionStartData,
    TurnEndData,
    event_of,
)
from tackroom.engine import Engine, EngineStorageError, StreamRecord
from tackroom.engine.embedded.store import Store
from tackroom.kit.events import EventEmitter
from tackroom.testing import running_engine
from tackroom.testing.backends import BACKENDS, engine_url_for

START = FunctionExecutionStartData(function_call_id="c1", function_id="calc::add")


@pytest.fixture(params=list(BACKENDS))
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    async with running_engine(engine_url_for(request.param, tmp_path)) as started:
        yield started


async def test_an_audited_event_is_stored_with_its_fact(engine: Engine) -> None:
    emitter = EventEmitter(engine)
    seq = await emitter.emit(
        event_of(session_id="s", run_id="r", event_id="r:c1:start", data=START)
    )
    [stored] = await engine.read(EVENTS.name, "s")
    assert (stored.seq, stored.data["event_id"]) == (seq, "r:c1:start")
    facts = await engine.read(FACTS.name, FACTS_GROUP)
    assert [f.data["fact_id"] for f in facts] == ["event:r:c1:start"]


async def test_a_turn_end_goes_to_both_streams_and_a_plain_event_to_one(engine: Engine) -> None:
    emitter = EventEmitter(engine)
    end = TurnEndData(turn_count=1, message_id="m")
    await emitter.emit(event_of(session_id="s", run_id="r", event_id="r:t1:end", data=end))
    error = ErrorData(kind="test", message="oops")
    seq = await emitter.emit(event_of(session_id="s", run_id="r", event_id="r:e", data=error))
    assert [r.data["event_id"] for r in await engine.read(EVENTS.name, "s")] == [
        "r:t1:end",
        "r:e",
    ]
    assert seq == 2
    assert [r.data["event_id"] for r in await engine.read(TURN_END.name, "s")] == ["r:t1:end"]


async def test_embedded_a_failed_commit_keeps_neither_the_event_nor_its_fact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert = Store.insert_record

    def full_for_facts(store: Store, record: StreamRecord) -> None:
        if record.stream == FACTS.name:
            raise EngineStorageError("engine database x: the disk is full")
        insert(store, record)

    monkeypatch.setattr(Store, "insert_record", full_for_facts)
    async with running_engine(engine_url_for("embedded", tmp_path)) as engine:
        emitter = EventEmitter(engine)
        event = event_of(session_id="s", run_id="r", event_id="r:c1:start", data=START)
        with pytest.raises(EngineStorageError, match="disk is full"):
            await emitter.emit(event)
        assert await engine.read(EVENTS.name, "s") == []
        assert await engine.read(FACTS.name, FACTS_GROUP) == []
