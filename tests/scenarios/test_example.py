"""The governance scenario of ``examples/governance/``, in process, from its own files: allow,
deny, approval (allowed, denied, expired), the redactor, and a budget that stops a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tackroom.engine import InvocationError
from tackroom.testing import SpanRecorder, wait_until
from tackroom.workers.orchestrator.dispatch import LEDGER_SCOPE

from .harness import (
    SECRETS,
    events,
    governed,
    resolve,
    wait_for_parked,
    wait_for_terminal,
)


async def session(engine: Any, session_id: str) -> list[dict[str, Any]]:
    """The session's messages (``session-tree::messages``)."""
    reply = await engine.trigger("session-tree::messages", {"session_id": session_id})
    return [item["message"] for item in reply["messages"]]


def result_of(messages: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    [found] = [
        m for m in messages if m["role"] == "function_result" and m["function_call_id"] == call_id
    ]
    return found


def text(message: dict[str, Any]) -> str:
    return " ".join(b.get("text", "") for b in message["content"] if isinstance(b, dict))


def of_type(found: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event["data"] for event in found if event["type"] == kind]


def gate_attributes(recorder: SpanRecorder) -> list[dict[str, Any]]:
    return [
        dict(event.attributes or {})
        for span in recorder.spans()
        for event in span.events
        if event.name == "tackroom.gate_decision"
    ]


# -- allow and deny ----------------------------------------------------------------------------


async def test_allow_a_call_a_rule_allows(example: Path) -> None:
    async with governed(example, "allow.yaml") as harness:
        record = await harness.run("allow-1", "What is 1234 + 5678?")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        result = result_of(await session(harness.engine, "allow-1"), "add-1")
        assert (result["is_error"], result["details"]["result"]) == (False, 6912)
        [gate] = of_type(await events(harness.engine, "allow-1"), "gate_decision")
        assert (gate["decision"], gate["decided_by"], gate["rule_id"]) == (
            "allow",
            "policy",
            "calculator",
        )
        harness.provider.assert_consumed()


async def test_deny_a_call_a_named_rule_denies(example: Path) -> None:
    recorder = SpanRecorder()
    async with governed(example, "deny.yaml", tracer_provider=recorder.provider) as harness:
        record = await harness.run("deny-1", "Write the release notes")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        result = result_of(await session(harness.engine, "deny-1"), "write-1")
        assert result["is_error"] is True
        assert text(result) == "[PERMISSION_DENIED] this agent may write only under scratch/"
        assert (result["details"]["denied_by"], result["details"]["rule_id"]) == (
            "permissions",
            "no-writes",
        )
        found = await events(harness.engine, "deny-1")
        [gate] = of_type(found, "gate_decision")
        assert (gate["decision"], gate["decided_by"], gate["rule_id"]) == (
            "deny",
            "policy",
            "no-writes",
        )
        assert of_type(found, "function_execution_start") == []  # it never ran
        assert not (example / "workspaces" / "deny-1" / "RELEASE.md").exists()
        # the model read the denial
        assert "PERMISSION_DENIED" in json.dumps(
            harness.provider.requests[1].model_dump(mode="json")["messages"]
        )
        await wait_until(lambda: gate_attributes(recorder), message="the gate's span event")
        assert {
            "tackroom.gate.function_id": "fs::write",
            "tackroom.gate.decision": "deny",
            "tackroom.gate.decided_by": "policy",
            "tackroom.gate.rule_id": "no-writes",
        } in gate_attributes(recorder)
    recorder.shutdown()


# -- approvals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["allow", "deny"])
async def test_approval_allowed_or_denied_through_approval_resolve(
    example: Path, decision: str
) -> None:
    async with governed(example, "approval.yaml") as harness:
        await harness.start("appr-1", "Plan the release, then read the plan back")
        await wait_for_parked(harness, "appr-1", "read-plan")
        pending = await harness.engine.trigger("approval::list_pending", {"session_id": "appr-1"})
        [waiting] = pending["pending"]
        assert (waiting["function_call_id"], waiting["function_id"], waiting["reason"]) == (
            "read-plan",
            "fs::read",
            "reading files outside config/ needs a person's approval",
        )
        [gate] = [
            g
            for g in of_type(await events(harness.engine, "appr-1"), "gate_decision")
            if g["function_call_id"] == "read-plan"
        ]
        assert (gate["decision"], gate["rule_id"]) == ("needs_approval", "ask-before-reading")

        decided = await resolve(
            harness.engine, "appr-1", "read-plan", decision, reason="checked", approver="ops"
        )
        assert (decided["decision"], decided["approver"]) == (decision, "ops")
        record = await wait_for_terminal(harness, "appr-1")
        assert (record.state, record.stop_reason) == ("stopped", "end")

        result = result_of(await session(harness.engine, "appr-1"), "read-plan")
        found = await events(harness.engine, "appr-1")
        started = [e["function_call_id"] for e in of_type(found, "function_execution_start")]
        if decision == "allow":
            assert result["is_error"] is False
            assert result["details"]["content"] == "1. tag v1.2\n2. ship it\n"
            assert started == ["write-plan", "read-plan"]
        else:
            assert text(result) == "Permission denied by the user: checked"
            assert started == ["write-plan"]
        [resolved] = of_type(found, "approval_resolved")
        assert (resolved["function_call_id"], resolved["decision"]) == ("read-plan", decision)
        assert [e["function_call_id"] for e in of_type(found, "approval_requested")] == [
            "read-plan"
        ]
        harness.provider.assert_consumed()

        # decided once: a second decision is refused and changes nothing
        with pytest.raises(InvocationError) as late:
            await resolve(harness.engine, "appr-1", "read-plan", "allow")
        assert late.value.remote_code == "already_decided"


async def test_approval_expired(example: Path) -> None:
    """The example's sweep runs every second; here the TTL is half a second."""
    sections = {"approvals": {"ttl_seconds": 0.5}}
    async with governed(example, "approval.yaml", sections=sections) as harness:
        await harness.start("appr-2", "Plan the release, then read the plan back")
        await wait_for_parked(harness, "appr-2", "read-plan")
        record = await wait_for_terminal(harness, "appr-2", timeout=15)
        assert (record.state, record.stop_reason) == ("stopped", "end")

        result = result_of(await session(harness.engine, "appr-2"), "read-plan")
        assert text(result) == "Approval expired: nobody decided within the time limit."
        decision = await harness.engine.trigger(
            "approval::get", {"session_id": "appr-2", "function_call_id": "read-plan"}
        )
        assert decision["pending"] is None
        assert (
            decision["decision"]["decision"],
            decision["decision"]["reason"],
            decision["decision"]["approver"],
        ) == ("deny", "expired", "approvals:ttl")
        assert decision["decision"]["decided_at"] >= decision["decision"]["requested_at"] + 0.5
        found = await events(harness.engine, "appr-2")
        assert [e["function_call_id"] for e in of_type(found, "function_execution_start")] == [
            "write-plan"
        ]
        with pytest.raises(InvocationError) as late:
            await resolve(harness.engine, "appr-2", "read-plan", "allow")
        assert late.value.remote_code == "already_decided"


# -- the redactor ------------------------------------------------------------------------------


async def test_the_redactor_keeps_the_secrets_out_of_everything(example: Path) -> None:
    secret_file = example / "workspaces" / "redact-demo" / "config" / "deploy.env"
    assert all(secret in secret_file.read_text() for secret in SECRETS)

    async with governed(example, "redact.yaml") as harness:
        record = await harness.run("redact-demo", "How do we deploy?")
        assert (record.state, record.stop_reason) == ("stopped", "end")
        engine = harness.engine

        messages = await session(engine, "redact-demo")
        result = result_of(messages, "read-env")
        content = result["details"]["content"]
        assert "OPENAI_API_KEY=[REDACTED:openai_key]" in content
        assert "AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]" in content
        assert "postgres://deploy:[REDACTED:url_credentials]@db.internal" in content
        assert "REGION=eu-west-1" in content  # the rest is left as it was
        assert json.loads(text(result))["content"] == content

        turn = await engine.get_state("turns", "redact-demo")
        assert turn is not None
        ledger = await engine.list_state(LEDGER_SCOPE)
        assert [entry.key for entry in ledger] == ["redact-demo/run-redact-demo/read-env"]
        found = await events(engine, "redact-demo")
        requests = [r.model_dump(mode="json") for r in harness.provider.requests]
        for where, value in [
            ("the session", messages),
            ("the ledger", [entry.value for entry in ledger]),
            ("the events", found),
            ("what the model got", requests),
            ("the turn record", turn.value),
        ]:
            dumped = json.dumps(value, default=repr)
            leaked = [secret for secret in SECRETS if secret in dumped]
            assert not leaked, f"{leaked} in {where}"
        assert len(of_type(found, "function_execution_end")) == 1
        harness.provider.assert_consumed()

    # Nothing wrote them to the engine's database either (it is closed: every page is on disk).
    database = b"".join(path.read_bytes() for path in (example / ".tackroom").glob("engine.db*"))
    assert b"REGION=eu-west-1" in database  # the result is there, redacted
    assert not [secret for secret in SECRETS if secret.encode() in database]


# -- the budget --------------------------------------------------------------------------------


async def test_a_budget_stops_the_run_before_the_model_is_called(example: Path) -> None:
    async with governed(example, "budget.yaml") as harness:
        engine = harness.engine
        # The README's setup step (`tackroom budget create session/budget-demo ...`).
        await engine.trigger(
            "budget::create",
            {"id": "budget-demo", "scope": "session/budget-demo", "cap_usd": 0.01,
             "period": "total"},
        )  # fmt: skip

        record = await harness.run("budget-demo", "Add 2 and 2")
        assert (record.state, record.stop_reason) == ("stopped", "budget_exceeded")
        assert harness.provider.calls == 1  # the second model call was never made
        found = await events(engine, "budget-demo")
        decisions = of_type(found, "budget_decision")
        assert [(d["allowed"], d["reason"], d["budget_id"]) for d in decisions] == [
            (True, "", None),
            (False, "budget_exceeded", "budget-demo"),
        ]
        [end] = of_type(found, "agent_end")
        assert (end["state"], end["stop_reason"]) == ("stopped", "budget_exceeded")
        usage = await engine.trigger("budget::usage", {"budget_id": "budget-demo"})
        assert (usage["current"]["spent_usd"], usage["current"]["records_count"]) == (0.02, 1)
        assert usage["current"]["reserved_usd"] == 0

        # The next run on the session is stopped before its first model call.
        record = await harness.run("budget-demo", "Add 2 and 2 again")
        assert (record.state, record.stop_reason) == ("stopped", "budget_exceeded")
        assert harness.provider.calls == 1
