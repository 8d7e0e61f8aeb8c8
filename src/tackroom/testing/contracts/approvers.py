"""The approver rules every approvals worker enforces (part of :class:`ApprovalsContract`).

A call recorded with ``approvers`` (roles, four eyes, quorum) and the ``requester`` its run acts
for is decided only by a ``principal`` the rules allow, of the run's tenant; a quorum's allows
are counted per distinct person, the call running at the last one. Refusals write nothing.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tackroom.contracts.tenancy import SEPARATOR
from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["ApproverRulesContract", "principal"]

NOT_ALLOWED = "approver_not_allowed"


def principal(user: str, *roles: str, tenant: str = "default") -> dict[str, Any]:
    return {"id": user, "roles": list(roles), "tenant": tenant}


ALICE = principal("alice", "admin", tenant="acme")
"""Who the runs here act for (an admin herself)."""
S1 = f"acme{SEPARATOR}s1"
"""Her session, as the gateway keys a tenant's session."""
S2 = f"acme{SEPARATOR}s2"


class ApproverRulesContract(WorkerContract):
    worker_name: ClassVar[str] = "approvals"

    async def ask_with(
        self,
        bus: Engine,
        cid: str,
        approvers: dict[str, Any],
        *,
        sid: str = S1,
        requester: dict[str, Any] | None = ALICE,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "session_id": sid,
            "function_call_id": cid,
            "function_id": "deploy::run",
            "arguments": {"target": "prod"},
            "reason": "deploys need approval",
            "run_id": "run-1",
            "approvers": approvers,
        }
        if requester is not None:
            payload["requester"] = requester
        reply: dict[str, Any] = await self.call(bus, "approval::request", payload)
        return reply

    async def decide_as(
        self,
        bus: Engine,
        cid: str,
        decision: str,
        who: dict[str, Any] | None,
        *,
        sid: str = S1,
    ) -> dict[str, Any]:
        reply: dict[str, Any] = await self.call(
            bus, "approval::resolve", _resolution(cid, decision, who, sid=sid)
        )
        return reply

    async def refused_as(
        self,
        bus: Engine,
        cid: str,
        decision: str,
        who: dict[str, Any] | None,
        *,
        sid: str = S1,
    ) -> tuple[str, str]:
        payload = _resolution(cid, decision, who, sid=sid)
        error = await self.failure(bus, "approval::resolve", payload)
        return error.remote_code, error.message

    @staticmethod
    async def stored_decision(bus: Engine, cid: str, sid: str = S1) -> Any:
        entry = await bus.get_state("approvals", f"{sid}/{cid}")
        return None if entry is None else entry.value

    async def still_pending(self, bus: Engine, cid: str, sid: str = S1) -> bool:
        got = await self.call(bus, "approval::get", {"session_id": sid, "function_call_id": cid})
        return got.get("pending") is not None and got.get("decision") is None

    # -- roles ---------------------------------------------------------------------------------
    async def test_only_an_approver_with_a_required_role_decides(self, bus: Engine) -> None:
        await self.ask_with(bus, "r1", {"roles": ["admin", "ops"]})
        viewer = principal("bob", "viewer", tenant="acme")
        code, message = await self.refused_as(bus, "r1", "allow", viewer)
        assert code == NOT_ALLOWED
        assert "admin" in message
        assert "ops" in message
        assert "\n" not in message
        assert await self.refused_as(bus, "r1", "deny", viewer) == (code, message)
        assert await self.stored_decision(bus, "r1") is None
        assert await self.still_pending(bus, "r1")

        carol = principal("carol", "ops", tenant="acme")
        record = await self.decide_as(bus, "r1", "allow", carol)
        assert record["decision"] == "allow"
        assert record.get("status", "decided") == "decided"
        assert record["approver"] == "carol"
        stored = await self.stored_decision(bus, "r1")
        assert stored["decision"] == "allow"
        assert stored["approver_principal"]["id"] == "carol"

    async def test_without_a_principal_a_call_with_approvers_is_refused(self, bus: Engine) -> None:
        await self.ask_with(bus, "p1", {"roles": ["admin"]})
        for decision in ("allow", "deny"):
            code, _ = await self.refused_as(bus, "p1", decision, None)
            assert code == NOT_ALLOWED
        assert await self.still_pending(bus, "p1")
        # the run ending is no approval: it needs no approver
        record = await self.decide_as(bus, "p1", "aborted", None)
        assert record["decision"] == "aborted"

    async def test_the_session_mode_does_not_skip_approver_rules(self, bus: Engine) -> None:
        await self.call(bus, "approval::set_mode", {"session_id": S1, "mode": "full"})
        reply = await self.ask_with(bus, "m1", {"roles": ["admin"]})
        assert reply["status"] == "pending"
        await self.call(
            bus,
            "approval::allow_for_session",
            {"session_id": S1, "function_id": "deploy::run"},
        )
        assert (await self.ask_with(bus, "m2", {"quorum": 2}))["status"] == "pending"

    # -- four eyes -----------------------------------------------------------------------------
    async def test_four_eyes_refuses_the_requesters_own_allow(self, bus: Engine) -> None:
        await self.ask_with(bus, "f1", {"roles": ["admin"], "four_eyes": True})
        code, message = await self.refused_as(bus, "f1", "allow", ALICE)
        assert code == NOT_ALLOWED
        assert "four eyes" in message
        impersonated = {**principal("ops-bot", "admin", tenant="acme"), "on_behalf_of": "alice"}
        assert (await self.refused_as(bus, "f1", "allow", impersonated))[0] == NOT_ALLOWED
        assert await self.still_pending(bus, "f1")
        dave = principal("dave", "admin", tenant="acme")
        assert (await self.decide_as(bus, "f1", "allow", dave))["decision"] == "allow"

        # the requester may always say no to its own call
        await self.ask_with(bus, "f2", {"roles": ["admin"], "four_eyes": True})
        assert (await self.decide_as(bus, "f2", "deny", ALICE))["decision"] == "deny"

    # -- quorum --------------------------------------------------------------------------------
    async def test_a_quorum_counts_distinct_approvers(self, bus: Engine) -> None:
        await self.ask_with(bus, "q1", {"roles": ["admin"], "quorum": 2})
        carol = principal("carol", "admin", tenant="acme")
        first = await self.decide_as(bus, "q1", "allow", carol)
        assert first["status"] == "pending"
        assert (first["approvals_so_far"], first["needed"]) == (1, 2)
        assert await self.stored_decision(bus, "q1") is None
        assert await self.still_pending(bus, "q1")

        again = await self.decide_as(bus, "q1", "allow", carol)  # the same approver counts once
        assert again["status"] == "pending"
        assert (again["approvals_so_far"], again["needed"]) == (1, 2)
        assert await self.stored_decision(bus, "q1") is None
        listed = await self.call(bus, "approval::list_pending", {"session_id": S1})
        [waiting] = listed["pending"]
        assert [vote["approver"] for vote in waiting["votes"]] == ["carol"]

        dave = principal("dave", "admin", tenant="acme")
        final = await self.decide_as(bus, "q1", "allow", dave)
        assert final.get("status", "decided") == "decided"
        assert final["decision"] == "allow"
        assert (final["approvals_so_far"], final["needed"]) == (2, 2)
        stored = await self.stored_decision(bus, "q1")
        assert stored["decision"] == "allow"
        assert [vote["approver"] for vote in stored["votes"]] == ["carol", "dave"]
        assert (await self.refused_as(bus, "q1", "allow", carol))[0] == "already_decided"

    async def test_one_deny_ends_a_quorum(self, bus: Engine) -> None:
        await self.ask_with(bus, "q2", {"quorum": 3})
        await self.decide_as(bus, "q2", "allow", principal("carol", tenant="acme"))
        record = await self.decide_as(bus, "q2", "deny", principal("erin", tenant="acme"))
        assert record["decision"] == "deny"
        assert (await self.stored_decision(bus, "q2"))["decision"] == "deny"

    # -- tenants -------------------------------------------------------------------------------
    async def test_another_tenants_approver_finds_no_call(self, bus: Engine) -> None:
        await self.ask_with(bus, "t1", {"roles": ["admin"]})
        outsider = principal("mallory", "admin", tenant="globex")
        code, message = await self.refused_as(bus, "t1", "allow", outsider)
        missing = await self.refused_as(bus, "t0", "allow", outsider)
        assert (code, message.replace("t1", "t0")) == missing
        assert missing[0] == "not_pending"
        assert await self.still_pending(bus, "t1")
        await self.decide_as(bus, "t1", "allow", principal("carol", "admin", tenant="acme"))
        # decided or not: another tenant's call is not there
        assert (await self.refused_as(bus, "t1", "deny", outsider))[0] == "not_pending"

        # a call without approver rules: its session id names the tenant
        await self.call(
            bus,
            "approval::request",
            {"session_id": S2, "function_call_id": "t2", "function_id": "fs::write"},
        )
        default = principal("bob")
        assert (await self.refused_as(bus, "t2", "allow", default, sid=S2))[0] == ("not_pending")
        mine = principal("bob", tenant="acme")
        record = await self.decide_as(bus, "t2", "allow", mine, sid=S2)
        assert record["approver"] == "bob"


def _resolution(cid: str, decision: str, who: dict[str, Any] | None, *, sid: str) -> dict[str, Any]:
    """``approval::resolve``'s payload, as ``who`` (none: a caller naming no principal)."""
    payload: dict[str, Any] = {"session_id": sid, "function_call_id": cid, "decision": decision}
    if who is not None:
        payload["principal"] = who
    return payload
