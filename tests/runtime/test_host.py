"""The host: start order, live registrations, reverse shutdown, rollback, no orphan tasks."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import EngineUnavailable, FunctionNotFound, open_engine
from tackroom.runtime import (
    ConfigError,
    HarnessConfig,
    Host,
    UnknownWorker,
    WorkerConfig,
    WorkerContext,
    WorkerCrashed,
    WorkerSpec,
    WorkerStartError,
    registry,
)
from tackroom.testing import memory_engine, wait_until
from tackroom.workers.engine.worker import WORKER as ENGINE_WORKER

MEMORY = "embedded::memory:"


class EchoConfig(WorkerConfig):
    prefix: str = ""


def other_tasks() -> set[asyncio.Task[Any]]:
    return asyncio.all_tasks() - {asyncio.current_task()}


def make_worker(name: str, log: list[str], *, fail: bool = False) -> WorkerSpec[EchoConfig]:
    """A worker that registers ``<name>::echo``, a state trigger, and one background task."""

    async def start(ctx: WorkerContext[EchoConfig]) -> None:
        async def echo(payload: Any) -> Any:
            return f"{ctx.config.prefix}{payload}"

        running = asyncio.Event()

        async def background() -> None:
            running.set()
            try:
                await asyncio.Event().wait()
            finally:
                log.append(f"{name} task ended")

        await ctx.register_function(f"{name}::echo", echo, description="echo")
        await ctx.add_state_trigger(name, f"{name}::echo")
        ctx.spawn(background(), name=f"{name}-background")
        await running.wait()
        log.append(f"{name} started")
        if fail:
            raise RuntimeError("cannot start")

    return WorkerSpec(name=name, description=name, config_model=EchoConfig, start=start)


ECHO = make_worker("echo", [])


async def test_start_makes_registrations_live_and_close_leaves_no_tasks() -> None:
    log: list[str] = []
    host = Host(engine=open_engine(MEMORY), workers=[ENGINE_WORKER, make_worker("a", log)])
    async with host:
        assert await host.engine.trigger("a::echo", "hi", timeout=5) == "hi"
        functions = {info.function_id: info.worker for info in await host.engine.list_functions()}
        assert functions["a::echo"] == "a"
        assert functions["state::get"] == "engine"
        assert log == ["a started"]
    assert log == ["a started", "a task ended"]
    assert other_tasks() == set()


async def test_shutdown_runs_in_reverse_order() -> None:
    log: list[str] = []
    host = Host(engine=open_engine(MEMORY), workers=[make_worker("a", log), make_worker("b", log)])
    async with host:
        assert host.worker_names == ["a", "b"]
    assert log == ["a started", "b started", "b task ended", "a task ended"]


async def test_closing_a_context_unregisters_then_cancels() -> None:
    async with memory_engine() as engine:
        ctx = WorkerContext(engine=engine, name="w", config=EchoConfig())
        seen_at_cancel: list[bool] = []

        running = asyncio.Event()

        async def background() -> None:
            running.set()
            try:
                await asyncio.Event().wait()
            finally:
                served = {info.function_id for info in await engine.list_functions()}
                seen_at_cancel.append("w::f" in served)

        async def handler(payload: Any) -> Any:
            return payload

        await ctx.register_function("w::f", handler)
        await ctx.add_state_trigger("scope", "w::f")
        ctx.spawn(background())
        await running.wait()
        assert len(ctx.registrations) == 2
        assert [w.name for w in await engine.list_workers()] == ["w"]
        await ctx.close()
        assert await engine.list_functions() == []
        assert seen_at_cancel == [False]
        assert ctx.registrations == []
        with pytest.raises(FunctionNotFound):
            await engine.trigger("w::f", 1)


async def test_closing_with_the_engine_away_says_so_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with memory_engine() as engine:
        ctx = WorkerContext(engine=engine, name="w", config=EchoConfig())

        async def handler(payload: Any) -> Any:
            return payload

        for n in range(3):
            await ctx.register_function(f"w::f{n}", handler)

        async def away(_: Any) -> None:
            raise EngineUnavailable("the NATS connection dropped")

        for registration in ctx.registrations:
            registration.on_unregister = away  # type: ignore[attr-defined]
        with caplog.at_level(logging.WARNING, logger="tackroom.runtime"):
            await ctx.close()
    assert [r.getMessage() for r in caplog.records] == [
        "worker w: 3 registration(s) not withdrawn, the engine is away (the NATS connection"
        " dropped); they end with the connection"
    ]
    assert all(r.exc_info is None for r in caplog.records)
    assert ctx.registrations == []


async def test_a_failing_start_rolls_back_everything_before_it() -> None:
    log: list[str] = []
    engine = open_engine(MEMORY)
    host = Host(engine=engine, workers=[make_worker("a", log), make_worker("b", log, fail=True)])
    with pytest.raises(WorkerStartError, match="worker 'b' failed to start") as caught:
        await host.start()
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert log == ["a started", "b started", "b task ended", "a task ended"]
    assert other_tasks() == set()
    await host.close()  # idempotent


async def test_a_crashed_background_task_stops_the_host() -> None:
    async def start(ctx: WorkerContext[EchoConfig]) -> None:
        async def crash() -> None:
            raise ValueError("lost the plot")

        ctx.spawn(crash(), name="cruncher")

    crasher = WorkerSpec(name="crasher", description="", config_model=EchoConfig, start=start)
    async with Host(engine=open_engine(MEMORY), workers=[crasher]) as host:
        with pytest.raises(WorkerCrashed, match="task 'cruncher' failed: ValueError") as caught:
            await asyncio.wait_for(host.wait(), 5)
    assert caught.value.worker == "crasher"
    assert other_tasks() == set()


async def test_request_stop_ends_wait() -> None:
    async with Host(engine=open_engine(MEMORY), workers=[]) as host:
        asyncio.get_running_loop().call_soon(host.request_stop)
        await asyncio.wait_for(host.wait(), 5)


async def test_a_host_starts_once() -> None:
    host = Host(engine=open_engine(MEMORY), workers=[])
    async with host:
        with pytest.raises(RuntimeError, match="starts once"):
            await host.start()


def test_a_worker_listed_twice_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="listed twice"):
        Host(engine=open_engine(MEMORY), workers=[ECHO, ECHO])


async def test_from_config_boots_the_list_with_each_workers_section(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(registry.BUILTIN_WORKERS, "echo", f"{__name__}:ECHO")
    config = HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "engine": MEMORY,
            "workers": ["engine", "echo"],
            "worker_config": {"echo": {"prefix": "> "}},
            "endpoint": {"socket": str(tmp_path / "t.sock")},
        }
    )
    host = Host.from_config(config)
    assert host.endpoint is None
    async with host:
        assert await host.engine.trigger("echo::echo", "hi", timeout=5) == "> hi"
        assert await host.engine.trigger("state::get", {"scope": "s", "key": "k"}) is None
    assert other_tasks() == set()

    only_echo = Host.from_config(config, workers=["echo"])
    assert only_echo.worker_names == ["echo"]


def test_from_config_refuses_an_unknown_worker_before_starting_anything() -> None:
    config = HarnessConfig.model_validate(
        {"schema_version": 1, "engine": MEMORY, "workers": ["engine", "enigne"]}
    )
    with pytest.raises(UnknownWorker, match="did you mean engine"):
        Host.from_config(config)


async def test_triggers_registered_through_the_context_are_delivered() -> None:
    seen: list[Any] = []

    async def start(ctx: WorkerContext[EchoConfig]) -> None:
        async def on_write(payload: Any) -> None:
            seen.append(payload["new_value"])

        await ctx.register_function("watch::on_write", on_write)
        await ctx.add_state_trigger("watched", "watch::on_write")

    watcher = WorkerSpec(name="watch", description="", config_model=EchoConfig, start=start)
    async with Host(engine=open_engine(MEMORY), workers=[watcher]) as host:
        await host.engine.set_state("watched", "k", 42)
        await wait_until(lambda: seen == [42])
