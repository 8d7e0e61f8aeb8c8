"""Lifecycle: the backend is an ``Engine``, keeps its data across a clean restart, refuses
calls once closed."""

from __future__ import annotations

import pytest

from tackroom.engine import Engine, EngineClosed, open_engine
from tackroom.testing import RecordingHandler, running_engine


async def test_backend_satisfies_the_engine_protocol(engine: Engine) -> None:
    assert isinstance(engine, Engine)


async def test_data_survives_a_clean_restart(engine_url: str) -> None:
    async with running_engine(engine_url) as engine:
        await engine.set_state("docs", "d1", {"v": 1})
        await engine.append("log", "a", "first")
        message_id = await engine.enqueue("late::fn", {"n": 1})

    async with running_engine(engine_url) as engine:
        entry = await engine.get_state("docs", "d1")
        assert entry is not None
        assert entry.value == {"v": 1}
        assert [r.data for r in await engine.read("log", "a")] == ["first"]
        assert await engine.append("log", "a", "second") == 2

        handler = RecordingHandler()
        await engine.register_function("late::fn", handler)
        [call] = await handler.wait_for_calls(1)
        assert call.message_id == message_id
        assert call.attempt == 1


async def test_calls_after_close_raise_engine_closed(engine_url: str) -> None:
    engine = open_engine(engine_url)
    await engine.start()
    await engine.close()

    with pytest.raises(EngineClosed):
        await engine.set_state("docs", "d1", {"v": 1})
    with pytest.raises(EngineClosed):
        await engine.trigger("any::fn", {}, timeout=1)
