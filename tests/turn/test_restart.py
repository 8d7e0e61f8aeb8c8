"""Restarting the harness, in process: what a turn finds when its harness comes back.

A clean shutdown (``Harness.close``) does not acknowledge the step in flight, so the next boot on
the same database resumes it as it would after a crash; a blocked call (:class:`~.harness.Hold`)
pins the shutdown to an exact point. The SIGKILL matrix is in ``test_crash_matrix.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness
from tackroom.contracts.events import EVENTS, AgentEndData, event_of
from tackroom.contracts.messages import AssistantMessage, TextBlock, Usage, UserMessage
from tackroom.engine import Engine
from tackroom.runtime import WorkerContext, WorkerSpec
from tackroom.testing import Script, ScriptedProvider, ScriptTurn, wait_until
from tackroom.workers.orchestrator.dispatch import LEDGER_SCOPE
from tackroom.workers.orchestrator.record import (
    OutboxAppend,
    OutboxEntry,
    OutboxEvent,
    TurnRecord,
)

from .harness import (
    RECORD,
    FakePolicy,
    Hold,
    SpecModel,
    approve,
    events_of,
    harness_config,
    messages_of,
    policy_harness,
    record_call,
    running_harness,
    text,
    turn_of,
    wait_for_state,
    wait_for_terminal,
)


async def test_a_restart_resumes_a_parked_turn_and_runs_the_approved_call_once(
    tmp_path: Path,
) -> None:
    """A turn parked for approval survives a restart; the approval given afterwards wakes it."""
    url = f"embedded:{tmp_path / 'engine.db'}"
    script = Script(
        [
            {"tool_calls": [record_call("rec", "n1")]},
            {"text": "Recorded.", "expect": {"has_function_result_for": "rec"}},
        ]
    )
    policy = FakePolicy({RECORD: "needs_approval"})
    async with policy_harness(tmp_path, script, policy, url=url) as harness:
        await harness.start("s", "record", run_id="run")
        await wait_for_state(harness, "s", "function_awaiting_approval")
    async with policy_harness(tmp_path, script, policy, url=url) as harness:
        assert (await harness.facade.get_state("s")) is not None
        await approve(harness, "s", "rec", "allow")
        record = await wait_for_terminal(harness, "s")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        assert harness.tools.lines() == [f"{RECORD} s rec n1"]
        ledger = await harness.engine.get_state(LEDGER_SCOPE, "s/run/rec")
        assert ledger is not None
        assert ledger.value["status"] == "done"


def slow_to_start(
    spec: WorkerSpec[Any], ready: Callable[[Engine], Awaitable[bool]]
) -> WorkerSpec[Any]:
    """``spec`` whose start first waits (up to 2 s) for ``ready(engine)``: a worker that does some
    I/O before it registers (fetching credentials, a model list; any registration on NATS)."""

    async def start(ctx: WorkerContext[Any]) -> None:
        with contextlib.suppress(AssertionError):
            await wait_until(lambda: ready(ctx.engine), timeout=2)
        await spec.start(ctx)

    return dataclasses.replace(spec, start=start)


async def test_a_resumed_turn_waits_for_the_workers_booted_after_the_orchestrator(
    tmp_path: Path,
) -> None:
    url = f"embedded:{tmp_path / 'engine.db'}"
    stalls = Script([{"text": "thinking", "stall_after_frames": 0}])
    async with running_harness(tmp_path, stalls, url=url) as harness:
        await harness.start("s", "hello", run_id="run")
        await wait_until(lambda: harness.provider.calls == 1, message="the model is streaming")
    # A clean shutdown mid-stream: the step is not acknowledged and resumes on the next boot.

    provider = ScriptedProvider(Script([ScriptTurn.say("hello again")]), cursor="transcript")

    async def turn_ended(engine: Engine) -> bool:
        record = await turn_of(engine, "s")
        return record is not None and record.terminal

    model = SpecModel(provider.name, slow_to_start(provider.worker_spec(), turn_ended))
    async with Harness(model, config=harness_config(tmp_path), engine=url) as facade:
        record = await wait_for_terminal(facade, "s")
        assert (record.state, record.stop_reason) == ("stopped", "end"), record.error


@pytest.mark.parametrize(
    "crash",
    [False, True],
    ids=["clean", "crash_before_removal"],
)
async def test_steering_taken_by_a_run_that_stops_is_not_taken_again(
    tmp_path: Path, crash: bool
) -> None:
    """A steering_check that stops the run (max_turns) still takes the waiting message into
    the session. The next run must not take it again, even if the harness died before the
    message left the inbox."""
    url = f"embedded:{tmp_path / 'engine.db'}"
    script = Script(
        [
            ScriptTurn.say("first answer"),
            ScriptTurn.say("second answer", expect={"last_user_contains": "second run"}),
        ]
    )
    holds = [Hold("steering removal", "session-inbox::remove")] if crash else []
    async with running_harness(tmp_path, script, url=url, holds=holds) as harness:
        engine = harness.engine
        await engine.trigger("session-tree::ensure", {"session_id": "s"})
        note = UserMessage.text("late note").model_dump(mode="json")
        await engine.trigger(
            "session-inbox::push", {"session_id": "s", "name": "steering", "item": note}
        )
        await harness.start("s", "first run", run_id="run-1", max_turns=1)
        record = await wait_for_terminal(harness, "s")
        assert (record.state, record.stop_reason) == ("stopped", "max_turns")
        if crash:
            await wait_until(lambda: harness.held == ["steering removal"], message="held")
    # With a crash, the host is gone before the message left the inbox (its removal was
    # blocked, and a shutdown does not acknowledge the step: as a SIGKILL would leave it).

    async with running_harness(tmp_path, script, url=url) as harness:
        record = await harness.run("s", "second run", run_id="run-2")
        entries = await messages_of(harness.engine, "s")
        texts = [text(e["message"]) for e in entries if e["message"]["role"] == "user"]
        assert texts == ["first run", "late note", "second run"]
        assert (record.state, record.stop_reason) == ("stopped", "end")
        harness.provider.assert_consumed()


async def test_a_new_run_first_applies_what_the_last_run_committed_but_never_applied(
    tmp_path: Path,
) -> None:
    """Where a step's commit and its effects are not one transaction (NATS), a run may end with
    its last effects still in the record's outbox; the next run must not overwrite them."""
    script = Script([ScriptTurn.say("second answer")])
    async with running_harness(tmp_path, script) as harness:
        engine = harness.engine
        await engine.trigger("session-tree::ensure", {"session_id": "s"})
        answer = AssistantMessage(content=[TextBlock(text="first answer")], stop_reason="end")
        ended = TurnRecord(
            session_id="s", run_id="old", provider="scripted", model="m", state="stopped",
            stop_reason="end", step=3,
        )  # fmt: skip
        end_frame = EVENTS.dump_event(
            event_of(
                session_id="s",
                run_id="old",
                event_id="old:3:1",
                data=AgentEndData(state="stopped", stop_reason="end", usage=Usage()),
            )
        )
        ended.outbox = [
            OutboxAppend(entries=[OutboxEntry(entry_id="old-t1-a", message=answer)]),
            OutboxEvent(frame=end_frame),
        ]
        await engine.set_state("turns", "s", ended.model_dump(mode="json"))

        await harness.run("s", "next", run_id="new")
        entries = await messages_of(engine, "s")
        assert [e["entry_id"] for e in entries][:1] == ["old-t1-a"]
        events = [r.data for r in await events_of(engine, "s")]
        assert [e["event_id"] for e in events if e["run_id"] == "old"] == ["old:3:1"]
