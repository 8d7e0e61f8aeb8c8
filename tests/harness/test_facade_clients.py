"""What a client that does not simply wait needs: ``submit`` (start without following),
``run(run_id=…)``, ``follow(session, after=cursor)``, and an engine object the harness hosts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness, UsageError
from tackroom.contracts.events import EVENTS
from tackroom.engine import Handler, Registration, open_engine
from tackroom.harness import runs
from tackroom.testing import MEMORY_URL, FunctionModel, wait_until


async def test_submit_starts_a_run_that_follow_picks_up_from_a_cursor(tmp_path: Path) -> None:
    release = asyncio.Event()
    harness = Harness(
        "scripted:m",
        script=[{"tool_calls": [{"name": "wait", "arguments": {}}]}, {"text": "done"}],
        home=tmp_path,
    )

    @harness.tool
    async def wait() -> str:
        """Wait for the test."""
        await release.wait()
        return "ok"

    async with harness:
        reply = await harness.submit("go", session="s", run_id="run-1")
        assert (reply.started, reply.run_id) == (True, "run-1")

        async def waiting() -> bool:
            view = await harness.get_state("s")
            return view is not None and view.state == "function_execute"

        await wait_until(waiting, message="the tool runs")
        busy = await harness.submit("again", session="s", run_id="run-2")
        assert (busy.started, busy.queued) == (False, False)
        assert (busy.reason or "").startswith("session_busy")
        queued = await harness.submit("and this", session="s", if_busy="queue")
        assert (queued.started, queued.queued, queued.run_id) == (False, True, "run-1")

        first = await harness.follow("s")
        seen = [await first.__anext__() for _ in range(2)]
        cursor = first.seq
        await first.aclose()
        release.set()
        rest = await harness.follow("s", after=cursor)
        events = [event async for event in rest]
        assert events[-1].type == "agent_end"
        assert rest.seq > cursor
        stored = [seq async for seq, _ in _stored(harness, "s")]
        assert stored[len(seen) : len(seen) + len(events)] == list(range(cursor + 1, rest.seq + 1))
        assert rest.result.run_id == "run-1"
        assert rest.result.output == "done"


async def _stored(harness: Harness, session: str) -> Any:
    events = harness.events(session)
    try:
        async for seq, event in events:
            yield seq, event
            if event.type == "agent_end":
                return
    finally:
        await events.aclose()  # type: ignore[attr-defined]


async def test_run_id_names_the_run(tmp_path: Path) -> None:
    async with Harness(FunctionModel(lambda m, i: "hi"), home=tmp_path) as harness:
        result = await harness.run("hello", session="s", run_id="run-mine")
        stream = harness.stream("again", session="s", run_id="run-theirs")
        [event async for event in stream]
    assert (result.run_id, stream.result.run_id) == ("run-mine", "run-theirs")
    assert stream.result.output == "hi"


async def test_an_engine_object_is_started_and_closed_by_the_harness() -> None:
    engine = open_engine(MEMORY_URL)
    registered: list[str] = []
    register = engine.register_function

    async def counting(function_id: str, handler: Handler, **options: Any) -> Registration:
        registered.append(function_id)
        return await register(function_id, handler, **options)

    setattr(engine, "register_function", counting)  # noqa: B010
    async with Harness(FunctionModel(lambda m, i: "hi"), engine=engine) as harness:
        assert harness.engine is engine
        assert (await harness.run("hello")).output == "hi"
    assert "run::start" in registered
    with pytest.raises(UsageError, match="engine URL"):
        Harness(FunctionModel(lambda m, i: "hi"), engine=open_engine(MEMORY_URL), attach=True)


async def test_run_types_only_the_events_its_result_is_folded_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run``'s events reach nobody but its result: every frame stays JSON (the result types its
    messages when they are read); ``stream`` hands every event out, typed."""
    parsed: list[str] = []

    class Counting:
        name = EVENTS.name

        def parse(self, data: Any) -> Any:
            parsed.append(data["type"])
            return EVENTS.parse(data)

    monkeypatch.setattr(runs, "EVENTS", Counting())
    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]
    harness = Harness("scripted:m", script=script * 2, home=tmp_path)

    @harness.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with harness:
        result = await harness.run("2 + 3?", session="s")
        assert (result.ok, result.output) == (True, "5")
        assert [m.role for m in result.messages] == [
            "user",
            "assistant",
            "function_result",
            "assistant",
        ]
        assert parsed == []  # run types no event: its messages are typed when first read
        streamed = [event.type async for event in harness.stream("again", session="s")]
    assert parsed == streamed
    assert {"turn_state_changed", "message_update", "function_execution_start"} <= set(parsed)
