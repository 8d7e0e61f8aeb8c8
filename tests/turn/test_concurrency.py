"""Sessions run side by side without touching each other; a busy session refuses or queues."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tackroom.testing import MEMORY_URL, Script, wait_until
from tackroom.testing.backends import BACKENDS, engine_url_for

from .harness import (
    RunningHarness,
    events_of,
    messages_of,
    roles,
    running_harness,
    text,
    wait_for_terminal,
)

SESSIONS = 100


def adding_script(count: int) -> Script:
    """Session ``s<i>`` asks for ``i + 1000``; its model calls ``calc::add`` and says the sum.

    Each session has its own keyed turns and call ids, so an answer, a request or a result that
    reached the wrong session would break a turn's ``expect`` or the transcript check.
    """
    turns: list[dict[str, Any]] = []
    for i in range(count):
        sid = f"s{i}"
        turns.append(
            {
                "session": sid,
                "tool_calls": [
                    {"function_id": "calc::add", "arguments": {"a": i, "b": 1000}, "id": f"add-{i}"}
                ],
                "expect": {"last_user_contains": f"What is {i} + 1000?"},
            }
        )
        turns.append(
            {
                "session": sid,
                "text": f"{i} + 1000 = {i + 1000}",
                "expect": {"has_function_result_for": f"add-{i}", "last_role": "function_result"},
            }
        )
    return Script(turns)


def engine_url(backend: str, tmp_path: Path) -> str:
    """``memory`` (the in-memory embedded engine) besides the backends every suite runs on."""
    return MEMORY_URL if backend == "memory" else engine_url_for(backend, tmp_path)


# Every test runs on each backend; in a single process, but on nats every call, state write,
# queue message and event still crosses the shared test server.
on_every_backend = pytest.mark.parametrize("backend", list(BACKENDS))


@pytest.mark.parametrize("backend", ["memory", *BACKENDS])
async def test_100_sessions_at_once_do_not_interfere(tmp_path: Path, backend: str) -> None:
    url = engine_url(backend, tmp_path)
    async with running_harness(tmp_path, adding_script(SESSIONS), url=url) as harness:
        results = await asyncio.gather(
            *(
                harness.facade.run(f"What is {i} + 1000?", session=f"s{i}", run_id=f"run-{i}")
                for i in range(SESSIONS)
            )
        )
        assert [(r.session_id, r.run_id, r.output) for r in results] == [
            (f"s{i}", f"run-{i}", f"{i} + 1000 = {i + 1000}") for i in range(SESSIONS)
        ]
        records = await asyncio.gather(
            *(wait_for_terminal(harness, f"s{i}", timeout=30) for i in range(SESSIONS))
        )

        assert [(r.state, r.stop_reason, r.turn_count) for r in records] == [
            ("stopped", "end", 2)
        ] * SESSIONS
        assert harness.provider.violations == []
        harness.provider.assert_consumed()
        assert harness.provider.calls == 2 * SESSIONS

        for i in range(SESSIONS):
            await _check_session(harness, i)


async def _check_session(harness: RunningHarness, i: int) -> None:
    sid, run = f"s{i}", f"run-{i}"
    entries = await messages_of(harness.engine, sid)
    assert roles(entries) == [
        (f"{run}-m0", "user"),
        (f"{run}-t1-a", "assistant"),
        (f"{run}-fr-add-{i}", "function_result"),
        (f"{run}-t2-a", "assistant"),
    ]
    question, call, result, answer = (e["message"] for e in entries)
    assert text(question) == f"What is {i} + 1000?"
    assert [b["arguments"] for b in call["content"] if b["type"] == "function_call"] == [
        {"a": i, "b": 1000}
    ]
    assert json.loads(text(result)) == {"schema_version": 1, "result": i + 1000}
    assert text(answer) == f"{i} + 1000 = {i + 1000}"

    events = await events_of(harness.engine, sid)
    assert [r.seq for r in events] == list(range(1, len(events) + 1))
    assert {(r.data["session_id"], r.data["run_id"]) for r in events} == {(sid, run)}
    assert [r.data["type"] for r in events].count("agent_end") == 1
    assert events[-1].data["type"] == "agent_end"


@on_every_backend
async def test_two_starts_at_once_on_one_session_start_one_run(
    tmp_path: Path, backend: str
) -> None:
    script = Script([{"text": "hello"}])
    async with running_harness(tmp_path, script, url=engine_url(backend, tmp_path)) as harness:
        replies = await asyncio.gather(
            *(harness.start("one", f"hi {n}", run_id=f"run-{n}") for n in range(10))
        )
        started = [reply for reply in replies if reply.started]
        assert len(started) == 1
        refused = [reply for reply in replies if not reply.started]
        assert all((r.reason or "").startswith("session_busy") for r in refused)
        record = await wait_for_terminal(harness, "one")
        assert (record.run_id, record.state, record.stop_reason) == (
            started[0].run_id,
            "stopped",
            "end",
        )
        entries = await messages_of(harness.engine, "one")
        assert [entry_id for entry_id, _ in roles(entries)] == [
            f"{record.run_id}-m0",
            f"{record.run_id}-t1-a",
        ]


@on_every_backend
async def test_a_busy_session_refuses_a_second_run_or_queues_its_message(
    tmp_path: Path, backend: str
) -> None:
    script = Script(
        [
            {
                "tool_calls": [{"function_id": "test::record", "arguments": {"note": "n1"}}],
                "expect": {"last_user_contains": "first"},
            },
            {
                "text": "Done, and I saw your follow-up.",
                "expect": {
                    "last_user_contains": "follow-up",
                    "has_function_result_for": "call_1_0",
                },
            },
        ]
    )
    release = asyncio.Event()
    url = engine_url(backend, tmp_path)
    async with running_harness(tmp_path, script, url=url, hold=release) as harness:
        engine = harness.engine
        first = await harness.start("busy", "first question", run_id="run-1")
        assert first.started
        await wait_until(lambda: harness.tools.waiting == 1, message="the tool is running")

        refused = await harness.start("busy", "a second run", run_id="run-2")
        assert not refused.started
        assert not refused.queued
        assert refused.reason == "session_busy: run run-1 is in state function_execute"

        queued = await harness.start("busy", "my follow-up", run_id="run-3", if_busy="queue")
        assert (queued.started, queued.queued, queued.run_id) == (False, True, "run-1")
        assert (queued.reason or "").startswith("session_busy")
        inbox = await engine.trigger(
            "session-inbox::peek", {"session_id": "busy", "name": "followup"}
        )
        assert [text(item) for item in inbox["items"]] == ["my follow-up"]

        release.set()
        record = await wait_for_terminal(harness, "busy")
        assert (record.run_id, record.state, record.stop_reason, record.turn_count) == (
            "run-1",
            "stopped",
            "end",
            2,
        )
        entries = await messages_of(engine, "busy")
        assert roles(entries) == [
            ("run-1-m0", "user"),
            ("run-1-t1-a", "assistant"),
            ("run-1-fr-call_1_0", "function_result"),
            ("run-1-t1-in0", "user"),  # the queued message, taken at steering_check
            ("run-1-t2-a", "assistant"),
        ]
        assert text(entries[3]["message"]) == "my follow-up"
        harness.provider.assert_consumed()
        assert harness.tools.lines() == ["test::record busy call_1_0 n1"]
        drained = await engine.trigger(
            "session-inbox::peek", {"session_id": "busy", "name": "followup"}
        )
        assert drained["items"] == []
        runs = {r.data["run_id"] for r in await events_of(engine, "busy")}
        assert runs == {"run-1"}
