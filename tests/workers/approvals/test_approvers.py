"""Approver rules beyond the contract: every refusal and partial allow leaves an audit fact, the
decision names its verified approver, a quorum's racing allows count each person once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tackroom.contracts import approvals as c
from tackroom.contracts.approvers import ApproverRules
from tackroom.contracts.audit import FACTS, FACTS_GROUP
from tackroom.contracts.events import EVENTS
from tackroom.contracts.principal import Principal
from tackroom.engine import Engine, InvocationError
from tackroom.kit.audit_facts import fact_of
from tackroom.testing import memory_engine
from tackroom.workers.approvals.worker import ApprovalsConfig, ApprovalsService
from tests.workers.approvals.conftest import TTL, FakeClock, Interleaving

ALICE = Principal(id="alice", roles=("admin",), tenant="acme")
BOB = Principal(id="bob", roles=("viewer",), tenant="acme")
CAROL = Principal(id="carol", roles=("admin",), tenant="acme")
DAVE = Principal(id="dave", roles=("admin",), tenant="acme")
MALLORY = Principal(id="mallory", roles=("admin",), tenant="globex")
RULES = ApproverRules(roles=("admin",), four_eyes=True, quorum=2)


def dumped(principal: Principal) -> dict[str, Any]:
    return principal.model_dump(mode="json")


async def ask(bus: Engine, cid: str = "c1", rules: ApproverRules = RULES) -> None:
    request = c.ApprovalRequest(
        session_id="s1",
        function_call_id=cid,
        function_id="deploy::run",
        arguments={"target": "prod"},
        reason="deploys need two admins",
        run_id="run-1",
        approvers=rules,
        requester=ALICE,
    )
    await c.REQUEST.call(bus, request)


async def resolve(bus: Engine, who: Principal | None, decision: str = "allow") -> Any:
    payload: dict[str, Any] = {"session_id": "s1", "function_call_id": "c1", "decision": decision}
    if who is not None:
        payload["principal"] = dumped(who)
    return await bus.trigger(c.RESOLVE.id, payload)


async def refused(bus: Engine, who: Principal | None, decision: str = "allow") -> str:
    with pytest.raises(InvocationError) as caught:
        await resolve(bus, who, decision)
    return caught.value.remote_code


async def facts(bus: Engine) -> list[dict[str, Any]]:
    return [dict(record.data) for record in await bus.read(FACTS.name, FACTS_GROUP)]


async def test_every_refusal_and_partial_allow_is_audited(bus: Engine, clock: FakeClock) -> None:
    await ask(bus)
    entry = await bus.get_state(c.PENDING_SCOPE.name, "s1/c1")
    assert entry is not None
    assert entry.value["approvers"] == RULES.model_dump(mode="json")
    assert entry.value["requester"] == dumped(ALICE)

    assert await refused(bus, ALICE) == c.APPROVER_NOT_ALLOWED_ERROR  # four eyes
    assert await refused(bus, BOB) == c.APPROVER_NOT_ALLOWED_ERROR  # no admin
    assert await refused(bus, None) == c.APPROVER_NOT_ALLOWED_ERROR  # nobody verified
    assert await refused(bus, MALLORY) == c.NOT_PENDING_ERROR  # another tenant
    partial = await resolve(bus, CAROL)
    assert (partial["status"], partial["approvals_so_far"], partial["needed"]) == (
        "pending",
        1,
        2,
    )
    await resolve(bus, CAROL)  # counted once: no second fact either
    assert await bus.read(EVENTS.name, "s1") == []  # nothing decided: no event, no wake

    recorded = await facts(bus)
    assert [(f["kind"], f["actor"]) for f in recorded] == [
        ("approval_refused", "alice"),
        ("approval_refused", "bob"),
        ("approval_refused", None),
        ("approval_refused", "mallory"),
        ("approval_vote", "carol"),
    ]
    assert all(f["principal"] == dumped(ALICE) for f in recorded)  # whom the run acts for
    assert all(f["session_id"] == "s1" and f["run_id"] == "run-1" for f in recorded)
    four_eyes, roles, nobody, outsider, vote = (f["fact"] for f in recorded)
    assert (four_eyes["error"], four_eyes["approver"]) == ("approver_not_allowed", dumped(ALICE))
    assert "four eyes" in four_eyes["reason"]
    assert "admin" in roles["reason"]
    assert nobody["approver"] is None
    assert (outsider["error"], outsider["approver"]["tenant"]) == ("not_pending", "globex")
    assert {key: vote[key] for key in ("outcome", "approvals_so_far", "needed")} == {
        "outcome": "counted",
        "approvals_so_far": 1,
        "needed": 2,
    }
    assert vote["approver"] == dumped(CAROL)

    clock.advance(1)
    decided = await resolve(bus, DAVE)
    assert decided["decision"] == "allow"
    assert decided["approver_principal"] == dumped(DAVE)
    [event] = await bus.read(EVENTS.name, "s1")
    data = event.data["data"]
    assert (data["approver"], data["approvals_so_far"], data["needed"]) == ("dave", 2, 2)
    assert data["approver_principal"] == dumped(DAVE)
    fact = fact_of(EVENTS.parse(event.data))
    assert fact is not None
    assert fact.kind == "approval_resolved"
    assert fact.fact["approver_principal"] == dumped(DAVE)
    assert (fact.fact["approvals_so_far"], fact.fact["needed"]) == (2, 2)
    [*_, resolved] = await facts(bus)
    assert resolved["kind"] == "approval_resolved"
    assert resolved["actor"] == "dave"


async def test_a_decision_without_rules_keeps_its_old_shape(bus: Engine) -> None:
    await ask(bus, rules=ApproverRules())  # rules that restrict nothing: anyone decides
    record = await resolve(bus, None, "deny")
    assert record["decision"] == "deny"
    plain = c.ApprovalRequest(session_id="s1", function_call_id="c2", function_id="fs::write")
    await c.REQUEST.call(bus, plain)
    pending = await bus.get_state(c.PENDING_SCOPE.name, "s1/c2")
    assert pending is not None
    assert not {"approvers", "requester", "votes"} & pending.value.keys()
    payload = {"session_id": "s1", "function_call_id": "c2", "decision": "allow"}
    stored = await bus.trigger(c.RESOLVE.id, {**payload, "approver": "ann"})
    assert stored["approver"] == "ann"
    assert not {"approver_principal", "status", "approvals_so_far", "needed"} & stored.keys()


@pytest.mark.parametrize("seed", range(4))
async def test_racing_allows_of_a_quorum_count_each_person_once(
    seed: int, clock: FakeClock
) -> None:
    async with memory_engine() as engine:
        backend = Interleaving(engine, seed=seed)
        service = ApprovalsService(backend, ApprovalsConfig(ttl_seconds=TTL), clock=clock)
        rules = ApproverRules(roles=("admin",), quorum=3)
        request = c.ApprovalRequest(
            session_id="s1",
            function_call_id="c1",
            function_id="deploy::run",
            run_id="run-1",
            approvers=rules,
            requester=ALICE,
        )
        await service.request(request)

        async def allow(who: Principal) -> str:
            resolve = c.ResolveRequest(
                session_id="s1", function_call_id="c1", decision="allow", principal=who
            )
            try:
                record = await service.resolve(resolve)
            except Exception as exc:
                return str(getattr(exc, "code", exc))
            return record.status

        # carol twice and dave twice: two people, one short of the quorum
        outcomes = await asyncio.gather(*(allow(who) for who in (CAROL, DAVE, CAROL, DAVE)))
        assert set(outcomes) == {"pending"}, outcomes
        got = await service.get(c.GetRequest(session_id="s1", function_call_id="c1"))
        assert got.pending is not None
        assert sorted(vote.approver for vote in got.pending.votes) == ["carol", "dave"]
        assert backend.writes[c.DECISIONS_SCOPE.name] == 0

        third = Principal(id="erin", roles=("admin",), tenant="acme")
        finals = await asyncio.gather(allow(third), allow(CAROL), allow(third))
        assert finals.count("decided") == 1, finals
        assert set(finals) <= {"decided", "pending", c.ALREADY_DECIDED_ERROR}, finals
        assert backend.writes[c.DECISIONS_SCOPE.name] == 1
        stored = await engine.get_state(c.DECISIONS_SCOPE.name, "s1/c1")
        assert stored is not None
        assert sorted(vote["approver"] for vote in stored.value["votes"]) == [
            "carol",
            "dave",
            "erin",
        ]
        assert len(await engine.read(EVENTS.name, "s1")) == 1
