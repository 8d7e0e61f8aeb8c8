"""Fail closed or fail open, explicit: a policy function that fails denies the call unless the
tool (``on_policy_error`` trait) or the orchestrator (``policy_on_error``) says allow — and
every call allowed that way is a ``gate_decision`` and an audit fact saying it failed open."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, cast

import pytest

from tackroom.contracts.audit import FACTS, FACTS_GROUP
from tackroom.contracts.policy import ON_ERROR_RULE_ID, error_verdict
from tackroom.contracts.tools import OnPolicyError, ToolTraits
from tackroom.engine.protocol import Engine
from tackroom.runtime import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.runtime.tools import register_tool
from tackroom.testing import Script
from tackroom.workers.orchestrator.gate import Gate
from tackroom.workers.orchestrator.record import CallState, ToolOffer
from tests.turn.harness import (
    POLICY,
    RECORD,
    FakePolicy,
    NoteRequest,
    NoteResult,
    RunningHarness,
    events_of,
    messages_of,
    record_call,
    running_harness,
    text,
)

OPEN = "test::open"
"""A tool that fails open: its calls run when the policy cannot answer."""
SHUT = "test::shut"
"""A tool that fails closed whatever the orchestrator says."""


class _NoConfig(WorkerConfig):
    pass


def _tools(ran: list[str]) -> WorkerSpec[Any]:
    async def start(ctx: WorkerContext[_NoConfig]) -> None:
        modes: tuple[tuple[str, OnPolicyError], ...] = ((OPEN, "allow"), (SHUT, "deny"))
        for function_id, mode in modes:

            async def handle(request: NoteRequest, call: Any, fid: str = function_id) -> NoteResult:
                ran.append(f"{fid} {request.note}")
                return NoteResult(recorded=request.note)

            await register_tool(
                ctx,
                function_id,
                handle,
                request_model=NoteRequest,
                response_model=NoteResult,
                description="Keep a note.",
                idempotent=False,
                parallel=False,
                traits=ToolTraits(on_policy_error=mode),
            )

    return WorkerSpec(name="trait-tools", description="", config_model=_NoConfig, start=start)


def _gated(
    tmp_path: Path, script: Script, policy: FakePolicy, ran: list[str], **orchestrator: Any
) -> AbstractAsyncContextManager[RunningHarness]:
    """The turn harness with ``policy`` as the gate and the two tools with a trait."""
    return running_harness(
        tmp_path,
        script,
        orchestrator={"policy_function": POLICY, **orchestrator},
        extra=[policy.worker_spec(), _tools(ran)],
    )


def _calls(*function_ids: str) -> Script:
    calls = [
        {"function_id": fid, "arguments": {"note": f"n{i}"}, "id": f"c{i}"}
        for i, fid in enumerate(function_ids)
    ]
    expect = {"has_function_result_for": calls[-1]["id"]}
    return Script([{"tool_calls": calls}, {"text": "Done.", "expect": expect}])


async def _gate_decisions(engine: Engine, session: str) -> dict[str, dict[str, Any]]:
    return {
        r.data["data"]["function_id"]: r.data["data"]
        for r in await events_of(engine, session)
        if r.data["type"] == "gate_decision"
    }


async def _audited(engine: Engine) -> list[dict[str, Any]]:
    return [
        r.data["fact"]
        for r in await engine.read(FACTS.name, FACTS_GROUP)
        if r.data.get("kind") == "gate_decision"
    ]


async def test_an_unreachable_policy_denies_by_default(tmp_path: Path) -> None:
    script = Script(
        [
            {"tool_calls": [record_call("rec", "n1")]},
            {"text": "Denied.", "expect": {"has_function_result_for": "rec"}},
        ]
    )
    options = {"policy_function": "nobody::check_permissions", "approvals_function": None}
    async with running_harness(tmp_path, script, orchestrator=options) as harness:
        record = await harness.run("s", "record", run_id="run")
        assert record.stop_reason == "end"
        assert harness.tools.lines() == []
        result = (await messages_of(harness.engine, "s"))[2]["message"]
        decided = (await _gate_decisions(harness.engine, "s"))[RECORD]
    assert result["details"]["denied_by"] == "gate_unavailable"
    assert text(result).startswith("[PERMISSION_DENIED] the policy check failed")
    assert (decided["decision"], decided["decided_by"]) == ("deny", "gate_unavailable")


async def test_a_tool_that_fails_open_runs_and_the_audit_says_why(tmp_path: Path) -> None:
    ran: list[str] = []
    policy = FakePolicy(mode="raise")
    async with _gated(tmp_path, _calls(OPEN, SHUT, RECORD), policy, ran) as harness:
        record = await harness.run("s", "go", run_id="run")
        decided = await _gate_decisions(harness.engine, "s")
        audited = await _audited(harness.engine)
        lines = harness.tools.lines()
    assert record.stop_reason == "end"
    assert ran == [f"{OPEN} n0"]  # only the tool that fails open ran
    assert lines == []  # test::record names no trait: the orchestrator's default, closed
    assert (decided[OPEN]["decision"], decided[OPEN]["decided_by"]) == ("allow", "fail_open")
    assert "on_policy_error is allow" in decided[OPEN]["reason"]
    assert "rules_unavailable" in decided[OPEN]["reason"]  # the policy's own failure
    assert decided[SHUT]["decided_by"] == decided[RECORD]["decided_by"] == "gate_unavailable"
    [fact] = [f for f in audited if f["function_id"] == OPEN]
    assert (fact["decision"], fact["decided_by"]) == ("allow", "fail_open")
    assert "the policy check failed" in fact["reason"]


async def test_the_orchestrator_may_fail_open_and_a_tool_still_close(tmp_path: Path) -> None:
    ran: list[str] = []
    policy = FakePolicy(mode="garbage")  # an answer the gate cannot read
    async with _gated(
        tmp_path, _calls(SHUT, RECORD), policy, ran, policy_on_error="allow"
    ) as harness:
        await harness.run("s", "go", run_id="run")
        decided = await _gate_decisions(harness.engine, "s")
        lines = harness.tools.lines()
    assert ran == []  # its trait says deny: it wins over the orchestrator's allow
    assert decided[SHUT]["decided_by"] == "gate_unavailable"
    assert len(lines) == 1
    assert lines[0].startswith(RECORD)
    assert decided[RECORD]["decided_by"] == "fail_open"
    assert "the orchestrator's policy_on_error is allow" in decided[RECORD]["reason"]


async def test_a_policy_that_answers_is_followed_whatever_the_trait(tmp_path: Path) -> None:
    ran: list[str] = []
    async with _gated(tmp_path, _calls(OPEN), FakePolicy({OPEN: "deny"}), ran) as harness:
        await harness.run("s", "go", run_id="run")
        decided = await _gate_decisions(harness.engine, "s")
    assert ran == []
    assert (decided[OPEN]["decision"], decided[OPEN]["decided_by"]) == ("deny", "policy")


@pytest.mark.parametrize("function_id", ["budget::set", "approval::resolve", "policy::reload"])
def test_a_protected_function_never_fails_open(function_id: str) -> None:
    gate = Gate(
        cast(Engine, None),
        policy_function="policy::check_permissions",
        approvals_function=None,
        timeout=1.0,
        hooks=None,
        on_error="allow",
    )
    call = CallState(id="c1", tool_name="t", function_id=function_id, arguments={})
    tool = ToolOffer(name="t", function_id=function_id, traits=ToolTraits(on_policy_error="allow"))
    assert gate._policy_failed(call, tool, "down").decided_by == "gate_unavailable"
    assert error_verdict("allow", function_id, "down").decision == "deny"
    ordinary = call.model_copy(update={"function_id": "web::get"})
    assert gate._policy_failed(ordinary, None, "down").decided_by == "fail_open"
    verdict = error_verdict("allow", "web::get", "down")
    assert (verdict.decision, verdict.rule_id) == ("allow", ON_ERROR_RULE_ID)
