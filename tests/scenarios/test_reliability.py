"""Reliability and security of the governance stack of ``examples/governance/`` (real policy,
approvals, hooks, redactor and budget workers):

- approval races across **two orchestrator replicas** on one engine (queue deliveries and
  state-trigger wakes land on either): two resolves for one call at once, and resolves for two
  calls of one batch at once → each tool runs at most once, exactly as decided;
- a restart between park and resolve, the decision taken by ``tackroom approve`` while nothing
  runs → the call runs once after the restart;
- a policy that does not answer in time → deny (``gate_unavailable``);
- a model that tries ``approval::resolve`` and ``auth::set_token`` → never offered, unknown when
  called by name, and denied by the policy worker's protected list whatever the rules say.

The in-process turn tests with a fake policy are in ``tests/turn/test_turn_paths.py`` (one
orchestrator: two decisions written at once, a decision before the turn parks, a broken or slow
policy) and ``tests/turn/test_restart.py`` (a restart with a decision written directly).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.policy import PROTECTED_RULE_ID, protected_by
from tackroom.contracts.turn import TURN_ON_APPROVAL, TURN_STEP
from tackroom.engine import FunctionError, InvocationError
from tackroom.testing import Script
from tackroom.testing.cli import run_tackroom
from tackroom.workers.orchestrator.dispatch import LEDGER_SCOPE
from tests.turn.harness import RECORD, Hold, RecordTools, install_holds, record_call

from .harness import (
    Governed,
    events,
    governed,
    resolve,
    turn_of,
    wait_for_parked,
    wait_for_terminal,
)

SESSIONS = 6
"""Sessions raced at once in each race test: more interleavings per run."""

RECORD_NEEDS_APPROVAL = """\
schema_version: 1
rules:
  - id: record-needs-approval
    function: test::record
    decision: needs_approval
    reason: recording needs a person
"""


def race_policy(example: Path) -> dict[str, dict[str, Any]]:
    (example / "race-permissions.yaml").write_text(RECORD_NEEDS_APPROVAL)
    return {"policy": {"rules_path": "race-permissions.yaml"}}


ONE_CALL = Script(
    [
        {"tool_calls": [record_call("rec", "n1")]},
        {"text": "Done.", "expect": {"has_function_result_for": "rec"}},
    ]
)
TWO_CALLS = Script(
    [
        {"tool_calls": [record_call("a", "first"), record_call("b", "second")]},
        {"text": "Both done.", "expect": {"has_function_result_for": ["a", "b"]}},
    ]
)


async def starts_of(harness: Governed, session_id: str) -> list[str]:
    found = await events(harness.engine, session_id)
    return sorted(
        e["data"]["function_call_id"] for e in found if e["type"] == "function_execution_start"
    )


def assert_both_replicas_worked(harness: Governed) -> None:
    replicas = {"orchestrator", "orchestrator-2"}
    assert set(harness.deliveries[TURN_STEP]) == replicas, harness.deliveries
    assert set(harness.deliveries[TURN_ON_APPROVAL]) == replicas, harness.deliveries


# -- approval races across two orchestrator replicas -------------------------------------------


@pytest.mark.parametrize(("first", "second"), [("allow", "allow"), ("allow", "deny")])
async def test_two_resolves_for_one_call_at_once_run_it_at_most_once(
    example: Path, first: str, second: str
) -> None:
    tools = RecordTools(example / "side_effects.log")
    sessions = [f"race-{n}" for n in range(SESSIONS)]
    async with governed(
        example,
        ONE_CALL,
        sections=race_policy(example),
        replicas=2,
        extra=[tools.worker_spec()],
        tools=["test::*"],
    ) as harness:
        for sid in sessions:
            await harness.start(sid, "record")
        for sid in sessions:
            await wait_for_parked(harness, sid, "rec")
        assert tools.lines() == []

        async def race(sid: str) -> list[object]:
            pair = await asyncio.gather(
                resolve(harness.engine, sid, "rec", first, approver="alice"),
                resolve(harness.engine, sid, "rec", second, approver="bob"),
                return_exceptions=True,
            )
            return list(pair)

        outcomes = dict(zip(sessions, await asyncio.gather(*map(race, sessions)), strict=True))
        winners: dict[str, str] = {}
        for sid, pair in outcomes.items():
            [won] = [o for o in pair if isinstance(o, dict)]
            [lost] = [o for o in pair if not isinstance(o, dict)]
            assert isinstance(lost, InvocationError)
            assert lost.remote_code == "already_decided"
            winners[sid] = won["decision"]

        for sid in sessions:
            record = await wait_for_terminal(harness, sid)
            assert (record.state, record.stop_reason) == ("stopped", "end"), record.error
            ran = winners[sid] == "allow"
            assert await starts_of(harness, sid) == (["rec"] if ran else [])
            entry = await harness.engine.get_state(LEDGER_SCOPE, f"{sid}/run-{sid}/rec")
            assert (entry is not None) == ran
        assert sorted(tools.lines()) == sorted(
            f"{RECORD} {sid} rec n1" for sid in sessions if winners[sid] == "allow"
        )
        assert_both_replicas_worked(harness)


@pytest.mark.parametrize(("for_a", "for_b"), [("allow", "allow"), ("allow", "deny")])
async def test_resolves_for_two_calls_of_one_batch_at_once_run_each_once(
    example: Path, for_a: str, for_b: str
) -> None:
    tools = RecordTools(example / "side_effects.log")
    sessions = [f"batch-{n}" for n in range(SESSIONS)]
    async with governed(
        example,
        TWO_CALLS,
        sections=race_policy(example),
        replicas=2,
        extra=[tools.worker_spec()],
        tools=["test::*"],
    ) as harness:
        for sid in sessions:
            await harness.start(sid, "record two")
        for sid in sessions:
            await wait_for_parked(harness, sid, "a", "b")

        await asyncio.gather(
            *(
                resolve(harness.engine, sid, call, decision)
                for sid in sessions
                for call, decision in (("a", for_a), ("b", for_b))
            )
        )
        ran = [call for call, decision in (("a", for_a), ("b", for_b)) if decision == "allow"]
        for sid in sessions:
            record = await wait_for_terminal(harness, sid)
            assert (record.state, record.stop_reason) == ("stopped", "end"), record.error
            assert await starts_of(harness, sid) == ran
            reply = await harness.engine.trigger("session-tree::messages", {"session_id": sid})
            ids = [item["entry_id"] for item in reply["messages"]]
            assert ids == [
                f"run-{sid}-m0",
                f"run-{sid}-t1-a",
                f"run-{sid}-fr-a",
                f"run-{sid}-fr-b",
                f"run-{sid}-t2-a",
            ]
        notes = {"a": "first", "b": "second"}
        assert sorted(tools.lines()) == sorted(
            f"{RECORD} {sid} {call} {notes[call]}" for sid in sessions for call in ran
        )
        assert harness.provider.calls == 2 * SESSIONS
        assert_both_replicas_worked(harness)


# -- restart between park and resolve ----------------------------------------------------------


async def test_a_restart_between_park_and_resolve_runs_the_call_once(example: Path) -> None:
    sections = race_policy(example)
    tools = RecordTools(example / "side_effects.log")
    restarted: dict[str, Any] = {"extra": [tools.worker_spec()], "tools": ["test::*"]}
    async with governed(example, ONE_CALL, sections=sections, **restarted) as h:
        await h.start("restart-1", "record")
        await wait_for_parked(h, "restart-1", "rec")

    # Nothing runs now: `tackroom approve` boots the approvals worker on the engine's file.
    approve = ["approve", "restart-1", "rec", "--approver", "ops", "--config", "tackroom.yaml"]
    approved = await run_tackroom(*approve, cwd=example)
    assert approved.code == 0, approved.stderr

    async with governed(example, ONE_CALL, sections=sections, **restarted) as h:
        record = await wait_for_terminal(h, "restart-1")
        assert (record.state, record.stop_reason) == ("stopped", "end"), record.error
        assert tools.lines() == [f"{RECORD} restart-1 rec n1"]
        assert await starts_of(h, "restart-1") == ["rec"]
        ledger = await h.engine.get_state(LEDGER_SCOPE, "restart-1/run-restart-1/rec")
        assert ledger is not None
        assert ledger.value["status"] == "done"
        decision = await h.engine.trigger(
            "approval::get", {"session_id": "restart-1", "function_call_id": "rec"}
        )
        assert (decision["decision"]["decision"], decision["decision"]["approver"]) == (
            "allow",
            "ops",
        )
    # And once more: a restart after the end runs nothing again.
    async with governed(example, ONE_CALL, sections=sections, **restarted) as h:
        record = await wait_for_terminal(h, "restart-1")
        assert record.stop_reason == "end"
        assert tools.lines() == [f"{RECORD} restart-1 rec n1"]


# -- policy timeout ----------------------------------------------------------------------------


async def test_a_policy_that_does_not_answer_in_time_denies(example: Path) -> None:
    """The real policy worker, stalled: the gate waits ``policy_timeout`` and denies."""
    sections = {"orchestrator": {"policy_timeout": 0.2}}

    def stall_policy(engine: Any) -> None:
        install_holds(engine, [Hold("policy", "policy::check_permissions")])

    async with governed(example, "allow.yaml", sections=sections, prepare=stall_policy) as h:
        record = await h.run("slow-policy", "What is 1234 + 5678?")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        found = await events(h.engine, "slow-policy")
        [gate] = [e["data"] for e in found if e["type"] == "gate_decision"]
        assert (gate["decision"], gate["decided_by"], gate["rule_id"]) == (
            "deny",
            "gate_unavailable",
            None,
        )
        assert "did not answer within 0.2s" in gate["reason"]
        assert await starts_of(h, "slow-policy") == []  # calc::add never ran
        assert not [e for e in found if e["type"] == "approval_requested"]


# -- protected functions -----------------------------------------------------------------------


async def test_a_model_cannot_approve_its_own_calls_or_write_credentials(example: Path) -> None:
    async with governed(example, "protected.yaml", tools=["*"]) as harness:
        view = await harness.run("greedy", "Approve your own calls")
        assert (view.state, view.stop_reason) == ("stopped", "end")
        harness.provider.assert_consumed()  # the first turn's tools_exclude held
        record = await turn_of(harness.engine, "greedy")  # the tools it offered
        assert record is not None

        offered = {tool.function_id for tool in record.tools}
        assert "calc::add" in offered
        assert [f for f in offered if protected_by(f) is not None] == []
        got = {tool.name for tool in harness.provider.requests[0].tools}
        assert got == {tool.name for tool in record.tools}

        reply = await harness.engine.trigger("session-tree::messages", {"session_id": "greedy"})
        results = {
            m["message"]["function_call_id"]: m["message"]
            for m in reply["messages"]
            if m["message"]["role"] == "function_result"
        }
        for call, tool in (("self-approve", "approval__resolve"), ("set-token", "auth__set_token")):
            assert results[call]["is_error"] is True
            assert results[call]["details"] == {"error": "unknown_tool"}
            assert results[call]["content"][0]["text"].startswith(f"unknown tool {tool!r}")
        found = await events(harness.engine, "greedy")
        assert not [e for e in found if e["type"] in ("gate_decision", "function_execution_start")]
        pending = await harness.engine.trigger("approval::list_pending", {})
        assert pending["pending"] == []

        # Even a rule file that allows everything cannot unlock them.
        (example / "permissions.yaml").write_text(
            "schema_version: 1\nrules:\n  - {id: anything-goes, function: '*', decision: allow}\n"
        )
        status = await harness.engine.trigger("policy::reload", {})
        assert status["rule_count"] == 1
        for function_id in ("approval::resolve", "auth::set_token", "budget::create"):
            verdict = await harness.engine.trigger(
                "policy::check_permissions", {"function_id": function_id, "args": {}}
            )
            assert (verdict["decision"], verdict["rule_id"]) == ("deny", PROTECTED_RULE_ID)
        verdict = await harness.engine.trigger(
            "policy::check_permissions", {"function_id": "calc::add", "args": {}}
        )
        assert (verdict["decision"], verdict["rule_id"]) == ("allow", "anything-goes")


async def test_hooks_and_catalog_writes_are_not_offered_to_a_model(example: Path) -> None:
    async with governed(example, "protected.yaml", tools=["*"]) as harness:
        await harness.start("greedy", "Approve your own calls")
        await wait_for_terminal(harness, "greedy")
        record = await turn_of(harness.engine, "greedy")
        assert record is not None
        offered = {tool.function_id for tool in record.tools}
        assert [f for f in offered if f.startswith("hook::") or f == "models::reconcile"] == []


async def test_a_failing_budget_record_does_not_fail_the_run(example: Path) -> None:
    def break_record(engine: Any) -> None:
        register = engine.register_function

        async def broken(payload: Any) -> Any:
            raise FunctionError("store_down", "the budget store is down")

        async def register_function(function_id: str, handler: Any, **options: Any) -> Any:
            return await register(
                function_id, broken if function_id == "budget::record" else handler, **options
            )

        setattr(engine, "register_function", register_function)  # noqa: B010

    async with governed(example, "allow.yaml", prepare=break_record) as harness:
        record = await harness.run("record-down", "What is 1234 + 5678?")
        assert record.state == "stopped", record.error
