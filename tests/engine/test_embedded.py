"""What only the embedded backend promises: one owner per file, memory mode, clean shutdown."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tackroom.contracts.bus import Function
from tackroom.engine import (
    EngineClosed,
    EngineCorrupt,
    EngineLocked,
    QueueConfig,
    current_invocation,
)
from tackroom.engine.embedded import EmbeddedEngine
from tackroom.runtime.typed import typed_handler


async def test_a_second_owner_of_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    async with EmbeddedEngine(path=path):
        with pytest.raises(EngineLocked, match="local endpoint"):
            await EmbeddedEngine(path=path).start()
    async with EmbeddedEngine(path=path) as again:
        assert await again.get_state("s", "k") is None


async def test_memory_engine_keeps_nothing() -> None:
    async with EmbeddedEngine(path=None) as engine:
        await engine.set_state("s", "k", 1)
    async with EmbeddedEngine(path=None) as engine:
        assert await engine.get_state("s", "k") is None


async def test_calls_on_a_closed_engine_are_typed_errors(tmp_path: Path) -> None:
    engine = EmbeddedEngine(path=tmp_path / "e.db")
    with pytest.raises(EngineClosed):
        await engine.trigger("x::y")
    await engine.start()
    await engine.close()
    with pytest.raises(EngineClosed):
        await engine.set_state("s", "k", 1)


async def test_clean_shutdown_does_not_spend_a_delivery(tmp_path: Path) -> None:
    """A delivery interrupted by close() is handed back uncounted, not treated as a failure."""
    path = tmp_path / "engine.db"
    started = asyncio.Event()
    attempts: list[int] = []

    async def slow(payload: Any) -> None:
        invocation = current_invocation()
        assert invocation is not None
        attempts.append(invocation.attempt)
        started.set()
        await asyncio.sleep(60)

    async with EmbeddedEngine(path=path) as engine:
        await engine.configure_queue("q", QueueConfig(max_deliveries=1))
        await engine.register_function("t::slow", slow)
        await engine.enqueue("t::slow", {}, queue="q")
        await asyncio.wait_for(started.wait(), 5)

    started.clear()
    async with EmbeddedEngine(path=path) as engine:
        await engine.configure_queue("q", QueueConfig(max_deliveries=1))
        await engine.register_function("t::slow", slow)
        await asyncio.wait_for(started.wait(), 5)
        assert await engine.list_dead_letters("q") == []
    assert attempts == [1, 1]


async def test_close_leaves_no_tasks_behind(tmp_path: Path) -> None:
    before = asyncio.all_tasks()
    engine = EmbeddedEngine(path=tmp_path / "e.db")
    await engine.start()

    async def tick(payload: Any) -> None:
        return None

    await engine.register_function("t::tick", tick)
    await engine.add_cron_trigger("* * * * * *", "t::tick")
    subscription = await engine.subscribe("s", "g")
    reader = asyncio.create_task(anext(aiter(subscription)))
    await asyncio.sleep(0)
    await engine.close()
    with pytest.raises(StopAsyncIteration):
        await reader
    assert asyncio.all_tasks() - before == set()


async def test_files_are_private_to_the_owner(tmp_path: Path) -> None:
    path = tmp_path / "state" / "engine.db"
    async with EmbeddedEngine(path=path) as engine:
        await engine.set_state("s", "k", {"secret": "value"})
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600


async def test_a_failed_start_releases_the_file(tmp_path: Path) -> None:
    path = tmp_path / "engine.db"
    path.write_bytes(b"this is not a database" * 100)
    for _ in range(2):  # the second try must fail the same way, not with EngineLocked
        with pytest.raises(EngineCorrupt):
            await EmbeddedEngine(path=path).start()


async def test_sequences_stay_right_when_the_head_cache_forgets(tmp_path: Path) -> None:
    """The per-group head cache is bounded; a group it forgot continues from storage."""
    from tackroom.engine.embedded import engine as embedded_engine

    async with EmbeddedEngine(path=tmp_path / "e.db") as engine:
        assert await engine.append("s", "first", 1) == 1
        for group in range(embedded_engine._HEADS_CACHED + 1):
            await engine.append("s", f"g{group}", 0)
        assert await engine.append("s", "first", 2) == 2


async def test_revisions_keep_growing_across_restarts_and_deletes(tmp_path: Path) -> None:
    """Writes no longer update a counter row; a deleted key's revision must still never be
    handed out again after a restart."""
    path = tmp_path / "engine.db"
    async with EmbeddedEngine(path=path) as engine:
        await engine.set_state("s", "a", 1)
        newest = await engine.set_state("s", "b", 2)
        assert await engine.delete_state("s", "b")
    async with EmbeddedEngine(path=path) as engine:
        again = await engine.set_state("s", "c", 3)
        assert again.revision > newest.revision


class _Ask(BaseModel):
    text: str


class _Told(BaseModel):
    text: str


async def test_a_typed_request_goes_by_reference_to_an_in_process_typed_handler() -> None:
    """Validated once where it was built: no dump, copy and re-validation per hop (a model
    call's request holds the whole transcript). A raw handler still gets its JSON copy."""
    ask = Function[_Ask, _Told]("test::ask", _Ask, _Told)
    seen: list[object] = []

    async def answer(request: _Ask) -> _Told:
        seen.append(request)
        return _Told(text=request.text.upper())

    async def raw(payload: Any) -> Any:
        seen.append(payload)
        return {"text": "raw"}

    async with EmbeddedEngine() as engine:
        await engine.register_function(ask.id, typed_handler(ask, answer).handler)
        await engine.register_function("test::raw", raw)
        request = _Ask(text="hi")
        assert await ask.call(engine, request) == _Told(text="HI")
        assert seen.pop() is request
        assert await ask.at("test::raw").call(engine, request) == _Told(text="raw")
        assert seen.pop() == {"text": "hi"}


async def test_a_typed_reply_goes_back_by_reference_only_to_a_caller_that_asked_by_reference() -> (
    None
):
    ask = Function[_Ask, _Told]("test::ask", _Ask, _Told)
    replies: list[_Told] = []

    async def answer(request: _Ask) -> _Told:
        replies.append(_Told(text=request.text.upper()))
        return replies[-1]

    async with EmbeddedEngine() as engine:
        await engine.register_function(ask.id, typed_handler(ask, answer).handler)
        told = await ask.call(engine, _Ask(text="hi"))
        assert told is replies[-1]  # no dump, copy and validation back into the same model
        raw = await engine.trigger(ask.id, {"text": "hi"})
        assert type(raw) is dict  # a JSON caller gets JSON
        assert raw == {"text": "HI"}


async def test_live_frames_keep_call_order_with_appends() -> None:
    """Embedded: one process, one buffer — a caught-up subscriber sees appends and live frames
    in the order they were made (NATS promises only "after what its publisher appended")."""
    async with EmbeddedEngine() as engine:
        subscription = await engine.subscribe("chat", "s1")
        try:
            await engine.append("chat", "s1", "first")
            assert (await anext(subscription)).data == "first"  # caught up: live from here
            for i in range(5):
                await engine.publish("chat", "s1", f"live {i}")
                await engine.append("chat", "s1", i)
            got = [await anext(subscription) for _ in range(10)]
        finally:
            await subscription.aclose()
    assert [r.data for r in got] == [x for i in range(5) for x in (f"live {i}", i)]
    assert [r.seq for r in got] == [x for i in range(1, 6) for x in (i, i + 1)]
