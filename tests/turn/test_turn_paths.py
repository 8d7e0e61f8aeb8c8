"""The turn's other paths, in process: approvals, the policy gate, limits, errors, abort, and
streaming while the model pauses. Restarts are in ``test_restart.py``, SIGKILL in
``test_crash_matrix.py``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.approvals import DECISIONS_SCOPE
from tackroom.contracts.events import EVENTS
from tackroom.engine import Subscription
from tackroom.runtime import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.testing import RecordingHandler, Script, ScriptTurn, wait_until
from tackroom.workers.orchestrator.streaming import _Coalescer

from .harness import (
    RECORD,
    FakePolicy,
    RunningHarness,
    SpecModel,
    approve,
    event_types,
    events_of,
    messages_of,
    policy_harness,
    record_call,
    roles,
    running_harness,
    text,
    wait_for_state,
    wait_for_terminal,
)


# -- approvals ----------------------------------------------------------------------------------
async def test_a_parked_call_waits_while_its_sibling_runs_then_runs_once_when_allowed(
    tmp_path: Path,
) -> None:
    script = Script(
        [
            {
                "tool_calls": [
                    {"function_id": "calc::add", "arguments": {"a": 1, "b": 2}, "id": "add"},
                    record_call("rec", "n1"),
                ]
            },
            {"text": "Both done.", "expect": {"has_function_result_for": ["add", "rec"]}},
        ]
    )
    policy = FakePolicy({RECORD: "needs_approval"})
    async with policy_harness(tmp_path, script, policy) as harness:
        await harness.start("s", "add and record", run_id="run")
        await wait_for_state(harness, "s", "function_awaiting_approval")

        events = [r.data for r in await events_of(harness.engine, "s")]
        ends = [
            e["data"]["function_call_id"] for e in events if e["type"] == "function_execution_end"
        ]
        assert ends == ["add"]  # the sibling ran
        [asked] = [e["data"] for e in events if e["type"] == "approval_requested"]
        assert (asked["function_call_id"], asked["function_id"], asked["reason"]) == (
            "rec",
            RECORD,
            "policy: needs_approval",
        )
        assert harness.tools.lines() == []
        view = await harness.facade.get_state("s")
        assert view is not None
        assert [(p.function_call_id, p.function_id) for p in view.awaiting_approval] == [
            ("rec", RECORD)
        ]
        assert harness.provider.calls == 1

        await approve(harness, "s", "rec", "allow")
        record = await wait_for_terminal(harness, "s")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        assert harness.tools.lines() == [f"{RECORD} s rec n1"]
        assert roles(await messages_of(harness.engine, "s")) == [
            ("run-m0", "user"),
            ("run-t1-a", "assistant"),
            ("run-fr-add", "function_result"),
            ("run-fr-rec", "function_result"),
            ("run-t2-a", "assistant"),
        ]
        types = await event_types(harness, "s")
        assert types.count("function_execution_start") == 2
        assert types.count("function_execution_end") == 2
        harness.provider.assert_consumed()
        # the gate asked once per call, never again for the approved one
        assert [r["function_id"] for r in policy.requests] == ["calc::add", RECORD]


async def test_two_decisions_written_at_once_run_each_call_exactly_once(tmp_path: Path) -> None:
    script = Script(
        [
            {"tool_calls": [record_call("a", "first"), record_call("b", "second")]},
            {"text": "Both recorded.", "expect": {"has_function_result_for": ["a", "b"]}},
        ]
    )
    policy = FakePolicy({RECORD: "needs_approval"})
    async with policy_harness(tmp_path, script, policy) as harness:
        await harness.start("s", "record two", run_id="run")
        await wait_for_state(harness, "s", "function_awaiting_approval")
        assert (await event_types(harness, "s")).count("approval_requested") == 2

        await asyncio.gather(
            approve(harness, "s", "a", "allow"), approve(harness, "s", "b", "allow")
        )
        record = await wait_for_terminal(harness, "s")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        assert sorted(harness.tools.lines()) == [f"{RECORD} s a first", f"{RECORD} s b second"]
        types = await event_types(harness, "s")
        assert types.count("function_execution_start") == 2
        assert [entry_id for entry_id, _ in roles(await messages_of(harness.engine, "s"))] == [
            "run-m0",
            "run-t1-a",
            "run-fr-a",
            "run-fr-b",
            "run-t2-a",
        ]
        harness.provider.assert_consumed()


async def test_a_decision_written_before_the_turn_parks_is_not_lost(tmp_path: Path) -> None:
    """The call is parked by the gate, but its batch is still running when the person decides:
    the turn is not parked yet, so the decision's trigger finds nothing to wake."""
    script = Script(
        [
            {
                "tool_calls": [
                    {"function_id": "calc::add", "arguments": {"a": 1, "b": 2}, "id": "add"},
                    record_call("rec", "n1"),
                ]
            },
            {"text": "Both done.", "expect": {"has_function_result_for": ["add", "rec"]}},
        ]
    )
    release = asyncio.Event()
    policy = FakePolicy({"calc::add": "needs_approval"})
    async with policy_harness(tmp_path, script, policy, hold=release) as harness:
        await harness.start("s", "add and record", run_id="run")
        await wait_until(lambda: harness.tools.waiting == 1, message="the sibling is running")
        view = await harness.facade.get_state("s")
        assert view is not None
        assert view.state == "function_execute"
        # A witness trigger registered after the orchestrator's: deliveries for one key run in
        # order, so once it has run, the orchestrator's trigger has seen the turn not parked.
        witness = RecordingHandler()
        await harness.engine.register_function("test::approval_seen", witness)
        await harness.engine.add_state_trigger(DECISIONS_SCOPE.name, "test::approval_seen")
        await approve(harness, "s", "add", "allow")
        await witness.wait_for_calls(1)
        release.set()
        record = await wait_for_terminal(harness, "s", timeout=5)
        assert (record.state, record.stop_reason) == ("stopped", "end")
        results = [
            e for e in await messages_of(harness.engine, "s") if e["entry_id"].startswith("run-fr-")
        ]
        assert [(e["entry_id"], e["message"]["is_error"]) for e in results] == [
            ("run-fr-add", False),
            ("run-fr-rec", False),
        ]
        assert harness.tools.lines() == [f"{RECORD} s rec n1"]


async def test_a_denied_call_gives_the_model_a_denial(tmp_path: Path) -> None:
    script = Script(
        [
            {"tool_calls": [record_call("rec", "n1")]},
            {"text": "Understood.", "expect": {"has_function_result_for": "rec"}},
        ]
    )
    async with policy_harness(tmp_path, script, FakePolicy({RECORD: "needs_approval"})) as harness:
        await harness.start("s", "record", run_id="run")
        await wait_for_state(harness, "s", "function_awaiting_approval")
        await approve(harness, "s", "rec", "deny", reason="not today")
        record = await wait_for_terminal(harness, "s")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        assert harness.tools.lines() == []
        result = (await messages_of(harness.engine, "s"))[2]["message"]
        assert result["is_error"] is True
        assert text(result) == "Permission denied by the user: not today"
        assert result["details"]["denied_by"] == "user"
        # the model read the denial
        assert "Permission denied by the user" in json.dumps(
            harness.provider.requests[1].model_dump(mode="json")["messages"]
        )


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("raise", "[rules_unavailable] the rule store is down"),
        ("hang", "did not answer within 0.2s"),
        ("garbage", "unreadable policy reply"),
    ],
)
async def test_a_broken_policy_denies_the_call(tmp_path: Path, mode: str, why: str) -> None:
    script = Script(
        [
            {"tool_calls": [record_call("rec", "n1")]},
            {"text": "It was denied.", "expect": {"has_function_result_for": "rec"}},
        ]
    )
    policy = FakePolicy(mode=mode)
    async with policy_harness(
        tmp_path, script, policy, orchestrator={"policy_timeout": 0.2}
    ) as harness:
        record = await harness.run("s", "record", run_id="run")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        assert harness.tools.lines() == []
        result = (await messages_of(harness.engine, "s"))[2]["message"]
        assert result["is_error"] is True
        assert result["details"]["denied_by"] == "gate_unavailable"
        assert text(result).startswith("[PERMISSION_DENIED] the policy check failed")
        assert why in text(result)
        assert len(policy.requests) == 1


async def test_a_policy_denial_names_its_rule(tmp_path: Path) -> None:
    script = Script(
        [
            {"tool_calls": [record_call("rec", "n1")]},
            {"text": "Denied.", "expect": {"has_function_result_for": "rec"}},
        ]
    )
    async with policy_harness(tmp_path, script, FakePolicy({RECORD: "deny"})) as harness:
        await harness.run("s", "record", run_id="run")
        assert harness.tools.lines() == []
        result = (await messages_of(harness.engine, "s"))[2]["message"]
        assert text(result) == "[PERMISSION_DENIED] policy: deny"
        assert (result["details"]["denied_by"], result["details"]["rule_id"]) == (
            "permissions",
            "rule-deny",
        )


async def test_without_a_policy_every_call_is_allowed(tmp_path: Path) -> None:
    script = Script(
        [
            {"tool_calls": [record_call("rec", "n1")]},
            {"text": "Recorded.", "expect": {"has_function_result_for": "rec"}},
        ]
    )
    async with running_harness(tmp_path, script) as harness:
        record = await harness.run("s", "record", run_id="run")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        assert harness.tools.lines() == [f"{RECORD} s rec n1"]
        assert "approval_requested" not in await event_types(harness, "s")


# -- limits -------------------------------------------------------------------------------------
async def test_max_turns_defaults_to_8(tmp_path: Path) -> None:
    script = Script([ScriptTurn.call("calc::add", {"a": n, "b": 1}) for n in range(10)])
    no_guard = {"loop_guard": {"same_tool_limit": None}}  # the same tool 8 times would trip it
    async with running_harness(tmp_path, script, orchestrator=no_guard) as harness:
        record = await harness.run("s", "keep adding", run_id="run")
        assert (record.state, record.stop_reason, record.max_turns) == (
            "stopped",
            "max_turns",
            8,
        )
        assert record.turn_count == 8
        assert harness.provider.calls == 8
        entries = await messages_of(harness.engine, "s")
        assert entries[-1]["entry_id"] == "run-stop-max_turns"
        assert text(entries[-1]["message"]) == "Stopped: max_turns (8) reached."
        assert len([e for e in entries if e["message"]["role"] == "function_result"]) == 8


async def test_the_same_call_more_than_3_times_stops_the_loop(tmp_path: Path) -> None:
    script = Script([ScriptTurn.call("calc::add", {"a": 1, "b": 2}) for _ in range(6)])
    async with running_harness(tmp_path, script) as harness:
        record = await harness.run("s", "add forever", run_id="run")
        assert (record.state, record.stop_reason) == ("stopped", "loop_detected")
        assert harness.provider.calls == 4
        entries = await messages_of(harness.engine, "s")
        assert entries[-1]["entry_id"] == "run-stop-loop_detected"
        assert (
            text(entries[-1]["message"])
            == "Stopped: the model made the same call with the same arguments 4 times."
        )


async def test_invalid_arguments_go_back_to_the_model_which_corrects_itself(
    tmp_path: Path,
) -> None:
    script = Script(
        [
            {"tool_calls": [{"function_id": RECORD, "arguments": {"text": "n1"}, "id": "bad"}]},
            {
                "tool_calls": [record_call("good", "n1")],
                "expect": {"has_function_result_for": "bad"},
            },
            {"text": "Recorded.", "expect": {"has_function_result_for": "good"}},
        ]
    )
    async with running_harness(tmp_path, script) as harness:
        record = await harness.run("s", "record", run_id="run")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        assert harness.tools.lines() == [f"{RECORD} s good n1"]  # the bad call never ran
        entries = await messages_of(harness.engine, "s")
        bad = entries[2]["message"]
        reason = (
            "(arguments): Additional properties are not allowed ('text' was unexpected);"
            " (arguments): 'note' is a required property"
        )
        assert bad["is_error"] is True
        assert text(bad) == f"invalid arguments for test__record: {reason}"
        assert bad["details"] == {"error": "invalid_arguments", "reason": reason}
        good = entries[4]["message"]
        assert (good["function_call_id"], good["is_error"]) == ("good", False)
        # the invalid call is shown to a client as settled at once
        ends = [
            r.data["data"]
            for r in await events_of(harness.engine, "s")
            if r.data["type"] == "function_execution_end"
        ]
        assert [(e["function_call_id"], e["is_error"]) for e in ends] == [
            ("bad", True),
            ("good", False),
        ]
        harness.provider.assert_consumed()


# -- errors -------------------------------------------------------------------------------------
class _NoConfig(WorkerConfig):
    pass


def serves_nothing(name: str) -> SpecModel:
    """A model named ``name`` whose worker registers no function."""

    async def start(ctx: WorkerContext[_NoConfig]) -> None:
        return None

    spec: WorkerSpec[Any] = WorkerSpec(
        name=name, description="Serves nothing.", config_model=_NoConfig, start=start
    )
    return SpecModel(name, spec)


async def test_an_unknown_provider_stops_the_run_with_a_visible_error(tmp_path: Path) -> None:
    async with running_harness(tmp_path, Script([]), model=serves_nothing("nope")) as harness:
        record = await harness.run("s", "hello", run_id="run")
        assert (record.state, record.stop_reason) == ("stopped", "error")
        assert record.error is not None
        assert record.error.kind == "permanent"
        assert "no provider worker serves provider::nope::stream" in record.error.message
        entries = await messages_of(harness.engine, "s")
        assert roles(entries) == [("run-m0", "user"), ("run-t1-a", "assistant")]
        answer = entries[1]["message"]
        assert answer["content"] == []  # an error is not an answer the model gave
        assert "no provider worker serves provider::nope::stream" in answer["error_message"]
        events = [r.data for r in await events_of(harness.engine, "s")]
        assert events[-1]["type"] == "agent_end"
        assert events[-1]["data"]["stop_reason"] == "error"
        view = await harness.facade.get_state("s")
        assert view is not None
        assert view.error is not None
        assert view.error.kind == "permanent"


async def test_an_unexpected_error_in_a_step_fails_the_turn_once(tmp_path: Path) -> None:
    script = Script([ScriptTurn.say("hello")])
    async with running_harness(tmp_path, script) as harness:
        engine = harness.engine
        await engine.trigger("session-tree::ensure", {"session_id": "s"})
        # A corrupted steering inbox: draining it at steering_check raises.
        await engine.set_state(
            "inbox", "s/steering", {"schema_version": 1, "items": [{"role": "bogus"}]}
        )
        record = await harness.run("s", "hello", run_id="run")
        assert record.state == "failed"
        assert record.error is not None
        assert record.error.kind == "unexpected_error"
        assert record.error.message.startswith("in steering_check: InvocationError")
        types = await event_types(harness, "s")
        assert types.count("error") == 1
        assert types[-1] == "agent_end"
        assert (await events_of(engine, "s"))[-1].data["data"]["state"] == "failed"
        assert await engine.list_dead_letters("turn-step") == []
        assert harness.provider.calls == 1


# -- abort --------------------------------------------------------------------------------------
async def state_of(harness: RunningHarness, session_id: str) -> str | None:
    view = await harness.facade.get_state(session_id)
    return None if view is None else view.state


async def test_abort_mid_run_stops_at_the_next_step(tmp_path: Path) -> None:
    script = Script(
        [
            {"tool_calls": [record_call("rec", "n1")]},
            {"text": "never asked"},
        ]
    )
    release = asyncio.Event()
    async with running_harness(tmp_path, script, hold=release) as harness:
        engine = harness.engine
        await harness.start("s", "record", run_id="run")
        await wait_until(lambda: harness.tools.waiting == 1, message="the tool is running")
        assert await state_of(harness, "s") == "function_execute"
        assert await harness.facade.abort("s", reason="user pressed stop") is True
        release.set()
        record = await wait_for_terminal(harness, "s")
        assert (record.state, record.stop_reason) == ("stopped", "aborted")
        assert harness.provider.calls == 1  # the model was not asked again
        entries = await messages_of(engine, "s")
        assert roles(entries) == [
            ("run-m0", "user"),
            ("run-t1-a", "assistant"),
            ("run-fr-rec", "function_result"),
            ("run-stop-aborted", "custom"),
        ]
        assert text(entries[-1]["message"]) == "Aborted: user pressed stop"
        assert harness.tools.lines() == [f"{RECORD} s rec n1"]
        assert await harness.facade.abort("s") is False
        assert await state_of(harness, "s") == "stopped"


async def test_abort_while_parked_for_approval(tmp_path: Path) -> None:
    script = Script([{"tool_calls": [record_call("rec", "n1")]}])
    async with policy_harness(tmp_path, script, FakePolicy({RECORD: "needs_approval"})) as harness:
        await harness.start("s", "record", run_id="run")
        await wait_for_state(harness, "s", "function_awaiting_approval")
        assert await harness.facade.abort("s", reason="changed my mind") is True
        record = await wait_for_terminal(harness, "s")
        assert (record.state, record.stop_reason) == ("stopped", "aborted")
        assert harness.tools.lines() == []
        entries = await messages_of(harness.engine, "s")
        assert [entry_id for entry_id, _ in roles(entries)] == [
            "run-m0",
            "run-t1-a",
            "run-fr-rec",
            "run-stop-aborted",
        ]
        assert text(entries[2]["message"]) == "Function call aborted: changed my mind"


async def test_abort_interrupts_a_model_stream_in_flight(tmp_path: Path) -> None:
    script = Script([{"text": "a long answer that never ends", "stall_after_frames": 2}])
    async with running_harness(tmp_path, script) as harness:
        await harness.start("s", "talk", run_id="run")
        await wait_until(lambda: harness.provider.calls == 1, message="the model is streaming")
        assert await state_of(harness, "s") == "assistant_streaming"
        assert await harness.facade.abort("s") is True
        record = await wait_for_terminal(harness, "s", timeout=5)
        assert (record.state, record.stop_reason) == ("stopped", "aborted")
        entries = await messages_of(harness.engine, "s")
        # Ended like any abort: a note saying why, no half-answer stored as the model's message.
        assert roles(entries) == [("run-m0", "user"), ("run-stop-aborted", "custom")]
        assert text(entries[1]["message"]) == "Aborted: aborted by the user"
        assert harness.provider.calls == 1
        assert (await event_types(harness, "s"))[-1] == "agent_end"


# -- streaming ----------------------------------------------------------------------------------
async def test_deltas_before_a_pause_are_shown_within_coalesce_seconds(tmp_path: Path) -> None:
    script = Script([{"text": "one two three", "stall_after_frames": 3}])
    async with running_harness(tmp_path, script) as harness:
        watching = await harness.engine.subscribe(EVENTS.name, "s")
        try:
            await harness.start("s", "talk", run_id="run")
            # coalesce_seconds is 0.05: well within a second, not when the model speaks again
            async with asyncio.timeout(1):
                assert "".join(await _live_deltas(watching, until="one two three")) == (
                    "one two three"
                )
        finally:
            await watching.aclose()
        stored = await events_of(harness.engine, "s")
        assert "message_update" not in [r.data["type"] for r in stored]  # live only


async def _live_deltas(subscription: Subscription, *, until: str) -> list[str]:
    """The live ``message_update`` deltas, read until they spell ``until``."""
    deltas: list[str] = []
    while "".join(deltas) != until:
        record = await anext(subscription)
        if record.live and record.data["type"] == "message_update":
            deltas.append(record.data["data"]["delta"])
    return deltas


async def test_coalescing_off_flushes_each_delta_and_does_not_spin_while_the_model_pauses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = 0
    flush_if_stale = _Coalescer.flush_if_stale

    async def counted(self: _Coalescer) -> None:
        nonlocal ticks
        ticks += 1
        await flush_if_stale(self)

    monkeypatch.setattr(_Coalescer, "flush_if_stale", counted)
    script = Script([{"text": "one two three", "stall_after_frames": 3}])
    orchestrator = {"coalesce_seconds": 0}
    async with running_harness(tmp_path, script, orchestrator=orchestrator) as harness:
        watching = await harness.engine.subscribe(EVENTS.name, "s")
        await harness.start("s", "talk", run_id="run")
        try:
            async with asyncio.timeout(5):  # one update per delta
                deltas = await _live_deltas(watching, until="one two three")
        finally:
            await watching.aclose()
        assert deltas == ["one ", "two ", "three"]
        ticks = 0
        await asyncio.sleep(0.6)  # the model is silent: the timer only polls for an abort
        assert ticks <= 5
        await harness.facade.abort("s")
