"""A real scripted turn with a gated tool leaves its security-relevant facts in the audit log —
gate decisions with the rule, the approval with its approver, tool calls by argument digest, the
run's end — each naming the principal the run acts for; no argument or key appears in any record;
the chain verifies. On both engine backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.audit import (
    APPEND,
    EXPORT,
    VERIFY,
    AppendRequest,
    AuditFact,
    ExportRequest,
    VerifyRequest,
)
from tackroom.contracts.credentials import AUTH_GET_TOKEN, ProviderRequest, fingerprint
from tackroom.contracts.events import EVENTS
from tackroom.contracts.policy import POLICY_RELOAD, EmptyRequest
from tackroom.contracts.principal import Principal
from tackroom.engine import Engine, open_engine
from tackroom.harness import Harness
from tackroom.kit.audit import digest, record_fact
from tackroom.kit.events import EventEmitter
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import wait_until
from tackroom.testing.backends import BACKENDS, engine_url_for

SECRET = "sk-planted-0123456789-SECRET"
WRITE = {"function_id": "fs::write", "arguments": {"path": "a.txt", "content": SECRET}, "id": "w1"}
READ = {"function_id": "fs::list", "arguments": {}, "id": "r1"}
SCRIPT = [{"tool_calls": [READ, WRITE]}, {"text": "done"}]


async def records(engine: Engine, **filters: Any) -> list[dict[str, Any]]:
    page = await EXPORT.call(engine, ExportRequest(**filters))
    return page.records


async def wait_for(engine: Engine, kinds: set[str], **filters: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    async def recorded() -> bool:
        found[:] = await records(engine, **filters)
        return kinds <= {record["kind"] for record in found}

    await wait_until(recorded, message=lambda: f"{kinds} in {[r['kind'] for r in found]}")
    return found


def one(found: list[dict[str, Any]], kind: str, **fact: Any) -> dict[str, Any]:
    [record] = [
        r
        for r in found
        if r["kind"] == kind and all(r["fact"].get(k) == v for k, v in fact.items())
    ]
    return record


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_gated_turn_is_audited_with_its_principal(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    home = tmp_path / "home"
    harness = Harness(
        "scripted:demo",
        home=home,
        engine=engine_url_for(backend, tmp_path),
        script=SCRIPT,
        tools=["fs::*"],
        principal=Principal(id="alice", roles=("writer",)),
    )
    async with harness:
        result = await harness.run("go", session="s1")
        [pending] = result.pending
        await harness.approvals.approve(pending)
        result = await harness.wait(result)
        assert result.output == "done"
        token = await AUTH_GET_TOKEN.call(harness.engine, ProviderRequest(provider="openai"))
        assert token.token == SECRET
        kinds = {"gate_decision", "approval_resolved", "tool_call", "tool_result", "run_end"}
        found = await wait_for(harness.engine, kinds, session_id="s1")
        used = await wait_for(harness.engine, {"credential_used"})
        report = await VERIFY.call(harness.engine, VerifyRequest())
    assert report.ok, report.problem

    alice = Principal(id="alice", roles=("writer",)).model_dump(mode="json")
    write_gate = one(found, "gate_decision", function_id="fs::write")
    assert write_gate["fact"]["decision"] == "needs_approval"
    assert write_gate["fact"]["decided_by"] == "policy"
    assert write_gate["fact"]["rule_id"]
    assert one(found, "gate_decision", function_id="fs::list")["fact"]["decision"] == "allow"
    approval = one(found, "approval_resolved", function_id="fs::write")
    assert approval["fact"]["decision"] == "allow"
    assert approval["actor"] == approval["fact"]["approver"]
    assert approval["fact"]["decided_at"] is not None
    call = one(found, "tool_call", function_id="fs::write")
    assert call["fact"]["arguments_digest"] == digest(WRITE["arguments"])
    assert one(found, "run_end")["fact"]["state"] == "stopped"
    assert all(r["principal"] == alice for r in found), [(r["kind"], r["principal"]) for r in found]
    assert all(r["run_id"] == result.run_id for r in found)

    credential = one(used, "credential_used", provider="openai")
    assert credential["fact"]["fingerprint"] == fingerprint(SECRET)

    stored = (home / "audit.db").read_bytes() + b"".join(
        p.read_bytes() for p in home.glob("audit.db-*")
    )
    assert SECRET.encode() not in stored
    assert SECRET not in json.dumps(found + used)


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_fact_is_recorded_once_and_none_is_lost_while_no_audit_runs(
    tmp_path: Path, backend: str
) -> None:
    """An event emitted again (a step replayed after a crash), an append retried after a lost
    reply, a fact appended twice: one record each — the fact id decides. A fact recorded while no
    audit worker runs is in the log once one starts; a restart reads on from its cursor."""
    url = engine_url_for(backend, tmp_path)
    home = tmp_path / "home"
    fact = AuditFact(fact_id="test:once", kind="session_deleted", session_id="gone")
    async with Harness("scripted:demo", home=home, engine=url, script=[{"text": "hi"}]) as harness:
        result = await harness.run("hello", session="s1")
        stored = await harness.engine.read(EVENTS.name, "s1")
        [end] = [r for r in stored if r.data["type"] == "agent_end"]
        await EventEmitter(harness.engine).emit_frame("s1", end.data)
        first = await APPEND.call(harness.engine, AppendRequest(fact=fact))
        again = await APPEND.call(harness.engine, AppendRequest(fact=fact))
        await record_fact(harness.engine, fact)
        await record_fact(harness.engine, fact.model_copy(update={"fact_id": "test:marker"}))
        await wait_until(lambda: _has(harness.engine, "test:marker"), message="the marker")
    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.seq == first.seq

    engine = open_engine(url)
    await engine.start()
    try:
        await record_fact(engine, fact.model_copy(update={"fact_id": "test:while-down"}))
    finally:
        await engine.close()
    async with Harness("scripted:demo", home=home, engine=url, script=[{"text": "hi"}]) as harness:
        found = await records(harness.engine)
        report = await VERIFY.call(harness.engine, VerifyRequest())
    assert report.ok, report.problem
    ids = [r["fact_id"] for r in found]
    assert len(ids) == len(set(ids))
    assert "test:while-down" in ids
    assert [r["run_id"] for r in found if r["kind"] == "run_end"] == [result.run_id]
    assert [r["kind"] for r in found if r["run_id"] == result.run_id][:1] == ["run_started"]


async def _has(engine: Engine, fact_id: str) -> bool:
    return any(r["fact_id"] == fact_id for r in await records(engine))


async def test_policy_loads_and_reloads_are_audited(tmp_path: Path) -> None:
    rules = tmp_path / "permissions.yaml"
    rules.write_text("schema_version: 1\nrules: []\n")
    config = HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "worker_config": {"policy": {"rules_path": str(rules), "reload_interval": 0}},
        }
    )
    async with Harness("scripted:demo", home=tmp_path / "home", script=[], config=config) as h:
        rules.write_text(
            "schema_version: 1\nrules:\n  - id: calc\n    function: calc::*\n    decision: allow\n"
        )
        reloaded = await POLICY_RELOAD.call(h.engine, EmptyRequest())
        found = await records(h.engine)
    loads = [r for r in found if r["kind"] == "policy_loaded"]
    assert [(r["fact"]["generation"], r["fact"]["rule_count"]) for r in loads] == [(1, 0), (2, 1)]
    assert loads[1]["fact"]["digest"] == reloaded.digest
    assert loads[1]["fact"]["path"] == str(rules)
    assert loads[1]["actor"] == "policy"


async def test_an_export_for_a_tenant_holds_its_records_only(tmp_path: Path) -> None:
    """A record is its principal's tenant's, else its session's: ``tenant=`` keeps those."""
    acme = Principal(id="alice", tenant="acme")
    facts = [
        AuditFact(fact_id="t:1", kind="session_deleted", session_id="acme:s1"),
        AuditFact(fact_id="t:2", kind="access_denied", principal=acme),
        AuditFact(fact_id="t:3", kind="session_deleted", session_id="beta:s1"),
        AuditFact(fact_id="t:4", kind="session_deleted", session_id="plain"),
    ]
    async with Harness("scripted:demo", home=tmp_path, script=[{"text": "hi"}]) as harness:
        for fact in facts:
            await APPEND.call(harness.engine, AppendRequest(fact=fact))
        mine = await records(harness.engine, tenant="acme")
        default = await records(harness.engine, tenant="default")
    assert [r["fact_id"] for r in mine] == ["t:1", "t:2"]
    assert "t:4" in [r["fact_id"] for r in default]
    assert not {"t:1", "t:2", "t:3"} & {r["fact_id"] for r in default}
