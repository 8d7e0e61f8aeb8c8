"""The contract of an approvals worker (``approval::*``), by function id and state layout.

Any worker that replaces ``approvals`` proves it fits by running this suite: subclass
:class:`ApprovalsContract` in a ``test_*.py`` module and name the worker (and its config for a
short TTL and a fast expiry sweep)::

    class TestMyApprovals(ApprovalsContract):
        worker_name = "my-approvals"
        fast_expiry_config = {"pending_timeout": 0.3}

Calls go through ``engine.trigger``; the only storage read is the decision at
``approvals/<session_id>/<function_call_id>``, because the orchestrator reads it there (its
state trigger on scope ``approvals`` wakes the parked turn).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest

from tackroom.engine import Engine, InvocationError
from tackroom.testing import RecordingHandler, wait_until
from tackroom.testing.contracts.approvers import ApproverRulesContract

__all__ = ["ApprovalsContract"]


class ApprovalsContract(ApproverRulesContract):
    """Requests, decisions, modes and expiry — and the approver rules (roles, four eyes, quorum,
    tenants) of :class:`~tackroom.testing.contracts.approvers.ApproverRulesContract`."""

    worker_name: ClassVar[str] = "approvals"
    worker_config: ClassVar[dict[str, Any]] = {}
    """The worker's config section for every test but the expiry one."""
    fast_expiry_config: ClassVar[dict[str, Any]] = {
        "ttl_seconds": 0.3,
        "sweep_schedule": "* * * * * *",
    }
    """A config under which a pending approval expires within a few seconds."""

    @pytest.fixture
    async def bus(self, engine_url: str) -> AsyncIterator[Engine]:
        """An engine serving the worker under test (and nothing else)."""
        async with self.hosted(engine_url, self.worker_config) as engine:
            yield engine

    @pytest.fixture
    async def fast_bus(self, engine_url: str) -> AsyncIterator[Engine]:
        async with self.hosted(engine_url, self.fast_expiry_config) as engine:
            yield engine

    # -- helpers -------------------------------------------------------------------------------
    async def ask(
        self, bus: Engine, sid: str, cid: str, function_id: str = "fs::write", **extra: Any
    ) -> dict[str, Any]:
        payload = {
            "session_id": sid,
            "function_call_id": cid,
            "function_id": function_id,
            "arguments": {"path": "a.txt"},
            "reason": "writes need approval",
            "run_id": "run-1",
            **extra,
        }
        reply: dict[str, Any] = await self.call(bus, "approval::request", payload)
        return reply

    async def resolve(self, bus: Engine, sid: str, cid: str, decision: str, **extra: Any) -> Any:
        payload = {"session_id": sid, "function_call_id": cid, "decision": decision, **extra}
        return await self.call(bus, "approval::resolve", payload)

    async def resolve_code(self, bus: Engine, sid: str, cid: str, decision: str) -> str:
        payload = {"session_id": sid, "function_call_id": cid, "decision": decision}
        return await self.code_of(bus, "approval::resolve", payload)

    async def pending_ids(self, bus: Engine, session_id: str | None = None) -> list[str]:
        payload = {} if session_id is None else {"session_id": session_id}
        reply = await self.call(bus, "approval::list_pending", payload)
        return [f"{p['session_id']}/{p['function_call_id']}" for p in reply["pending"]]

    @staticmethod
    async def decision_entry(bus: Engine, sid: str, cid: str) -> tuple[Any, int] | None:
        entry = await bus.get_state("approvals", f"{sid}/{cid}")
        return None if entry is None else (entry.value, entry.revision)

    # -- request, list, get --------------------------------------------------------------------
    async def test_a_request_is_pending_listed_and_readable(self, bus: Engine) -> None:
        reply = await self.ask(bus, "s1", "c1")
        assert reply["status"] == "pending"
        assert reply["reason"]
        await self.ask(bus, "s2", "c9", "shell::run")
        assert await self.pending_ids(bus) == ["s1/c1", "s2/c9"]
        assert await self.pending_ids(bus, "s1") == ["s1/c1"]
        assert await self.pending_ids(bus, "nobody") == []

        got = await self.call(bus, "approval::get", {"session_id": "s1", "function_call_id": "c1"})
        pending = got["pending"]
        assert got.get("decision") is None
        assert pending["function_id"] == "fs::write"
        assert pending["arguments"] == {"path": "a.txt"}
        assert pending["reason"] == "writes need approval"
        assert pending["run_id"] == "run-1"
        assert pending["expires_at"] > pending["requested_at"]
        assert await self.decision_entry(bus, "s1", "c1") is None

    async def test_request_is_idempotent_per_call(self, bus: Engine) -> None:
        first = await self.ask(bus, "s1", "c1")
        again = await self.ask(bus, "s1", "c1")
        assert again["status"] == "pending"
        assert again.get("expires_at") == first.get("expires_at")
        assert await self.pending_ids(bus) == ["s1/c1"]

    async def test_a_call_id_reused_by_another_call_is_refused(self, bus: Engine) -> None:
        await self.ask(bus, "s1", "c1")
        payload = {
            "session_id": "s1",
            "function_call_id": "c1",
            "function_id": "shell::run",
            "arguments": {"cmd": "rm -rf /"},
        }
        assert await self.code_of(bus, "approval::request", payload) == "call_conflict"
        got = await self.call(bus, "approval::get", {"session_id": "s1", "function_call_id": "c1"})
        assert got["pending"]["function_id"] == "fs::write"
        # An allowed call's id is not a blank cheque for a later, different call either.
        await self.resolve(bus, "s1", "c1", "allow")
        other_args = {"path": "/etc/passwd"}
        payload = {
            "session_id": "s1",
            "function_call_id": "c1",
            "function_id": "fs::write",
            "arguments": other_args,
        }
        assert await self.code_of(bus, "approval::request", payload) == "call_conflict"

    async def test_a_later_run_reusing_a_call_id_needs_its_own_decision(self, bus: Engine) -> None:
        """Call ids are unique per run only: an earlier run's allow is history, not a cheque."""
        await self.ask(bus, "s1", "c1")
        await self.resolve(bus, "s1", "c1", "allow")
        earlier = await self.call(
            bus, "approval::get", {"session_id": "s1", "function_call_id": "c1"}
        )
        later = {
            "session_id": "s1",
            "function_call_id": "c1",
            "function_id": "fs::write",
            "arguments": {"path": "other.txt"},
            "run_id": f"{earlier['decision']['run_id']}-later",
        }
        reply = await self.call(bus, "approval::request", later)
        assert reply["status"] == "pending"
        got = await self.call(bus, "approval::get", {"session_id": "s1", "function_call_id": "c1"})
        assert got["decision"] is None
        assert got["pending"]["arguments"] == {"path": "other.txt"}

    async def test_ids_with_a_slash_are_invalid(self, bus: Engine) -> None:
        payload = {"session_id": "a/b", "function_call_id": "c1", "function_id": "fs::write"}
        assert await self.code_of(bus, "approval::request", payload) == "invalid_request"
        assert await self.resolve_code(bus, "s1", "c/1", "allow") == "invalid_request"
        assert await self.resolve_code(bus, "s1", "c1", "maybe") == "invalid_request"

    # -- resolve -------------------------------------------------------------------------------
    async def test_resolve_records_the_decision_with_approver_and_time(self, bus: Engine) -> None:
        await self.ask(bus, "s1", "c1")
        record = await self.resolve(bus, "s1", "c1", "allow", approver="alice", reason="ok")
        assert record["decision"] == "allow"
        assert record["approver"] == "alice"
        assert record["reason"] == "ok"
        assert isinstance(record["decided_at"], int | float)
        assert record["schema_version"] == 1

        stored = await self.decision_entry(bus, "s1", "c1")
        assert stored is not None
        value, _ = stored
        assert value["decision"] == "allow"
        assert value["approver"] == "alice"
        assert await self.pending_ids(bus) == []
        got = await self.call(bus, "approval::get", {"session_id": "s1", "function_call_id": "c1"})
        assert got["decision"]["approver"] == "alice"
        assert got["decision"]["decided_at"] == record["decided_at"]
        assert got.get("pending") is None

    async def test_resolve_of_an_unknown_call_is_not_pending(self, bus: Engine) -> None:
        assert await self.resolve_code(bus, "s1", "nope", "allow") == "not_pending"
        assert await self.decision_entry(bus, "s1", "nope") is None
        assert await bus.list_state("approvals") == []

    async def test_resolve_twice_is_already_decided_and_writes_nothing(self, bus: Engine) -> None:
        await self.ask(bus, "s1", "c1")
        await self.resolve(bus, "s1", "c1", "deny", approver="bob", reason="no")
        before = await self.decision_entry(bus, "s1", "c1")
        assert await self.resolve_code(bus, "s1", "c1", "allow") == "already_decided"
        with pytest.raises(InvocationError) as caught:
            await self.resolve(bus, "s1", "c1", "allow")
        assert "deny" in caught.value.message
        assert "bob" in caught.value.message
        stored = await self.decision_entry(bus, "s1", "c1")
        assert stored is not None
        assert stored == before  # same value, same revision: nothing was written
        assert stored[0]["decision"] == "deny"

    async def test_concurrent_decisions_one_wins_and_wakes_once(self, bus: Engine) -> None:
        wakes = RecordingHandler()
        await bus.register_function("test::on_approval", wakes)
        await bus.add_state_trigger("approvals", "test::on_approval")
        await self.ask(bus, "s1", "c1")

        async def attempt(decision: str, approver: str) -> Any:
            try:
                return await self.resolve(bus, "s1", "c1", decision, approver=approver)
            except InvocationError as exc:
                return exc.remote_code

        outcomes = await asyncio.gather(
            *(attempt("allow" if i % 2 else "deny", f"user{i}") for i in range(8))
        )
        winners = [o for o in outcomes if isinstance(o, dict)]
        assert len(winners) == 1, outcomes
        assert sorted(o for o in outcomes if isinstance(o, str)) == ["already_decided"] * 7
        stored = await self.decision_entry(bus, "s1", "c1")
        assert stored is not None
        value, revision = stored
        assert value["approver"] == winners[0]["approver"]
        assert value["decision"] == winners[0]["decision"]
        # One write, so one wake of the turn: the first trigger delivery (deliveries of a key
        # keep write order) is a create whose revision is still the stored one, after every
        # resolve has returned; a second write would have moved it.
        await wait_until(lambda: len(wakes.calls) >= 1)
        first = wakes.calls[0].payload
        assert first["key"] == "s1/c1"
        assert first["old_value"] is None
        assert first["revision"] == revision
        assert len(wakes.calls) == 1

    async def test_aborted_is_a_decision(self, bus: Engine) -> None:
        await self.ask(bus, "s1", "c1")
        record = await self.resolve(bus, "s1", "c1", "aborted", reason="run aborted")
        assert record["decision"] == "aborted"
        assert await self.resolve_code(bus, "s1", "c1", "allow") == "already_decided"

    # -- modes and allow-for-session -----------------------------------------------------------
    async def test_mode_full_allows_everything_at_once(self, bus: Engine) -> None:
        settings = await self.call(bus, "approval::set_mode", {"session_id": "s1", "mode": "full"})
        assert settings["mode"] == "full"
        reply = await self.ask(bus, "s1", "c1", "shell::run")
        assert reply["status"] == "allowed"
        assert await self.pending_ids(bus) == []
        assert await self.decision_entry(bus, "s1", "c1") is None
        # other sessions keep the default (manual)
        assert (await self.ask(bus, "s2", "c1"))["status"] == "pending"

    async def test_mode_auto_allows_only_the_always_allow_globs(self, bus: Engine) -> None:
        request = {"session_id": "s1", "mode": "auto", "always_allow": ["fs::read*", "calc::*"]}
        settings = await self.call(bus, "approval::set_mode", request)
        assert settings["always_allow"] == ["fs::read*", "calc::*"]
        assert (await self.ask(bus, "s1", "c1", "fs::read"))["status"] == "allowed"
        assert (await self.ask(bus, "s1", "c2", "fs::read_many"))["status"] == "allowed"
        assert (await self.ask(bus, "s1", "c3", "calc::add"))["status"] == "allowed"
        assert (await self.ask(bus, "s1", "c4", "fs::write"))["status"] == "pending"
        assert (await self.ask(bus, "s1", "c5", "xfs::read"))["status"] == "pending"
        assert await self.pending_ids(bus) == ["s1/c4", "s1/c5"]
        # set_mode without always_allow keeps the globs; manual ignores them
        manual = await self.call(bus, "approval::set_mode", {"session_id": "s1", "mode": "manual"})
        assert manual["always_allow"] == ["fs::read*", "calc::*"]
        assert (await self.ask(bus, "s1", "c6", "fs::read"))["status"] == "pending"

    async def test_allow_for_session(self, bus: Engine) -> None:
        assert (await self.ask(bus, "s1", "c1"))["status"] == "pending"
        request = {"session_id": "s1", "function_id": "fs::write"}
        settings = await self.call(bus, "approval::allow_for_session", request)
        assert "fs::write" in settings["allowed_functions"]
        again = await self.call(bus, "approval::allow_for_session", request)
        assert again["allowed_functions"].count("fs::write") == 1
        assert (await self.ask(bus, "s1", "c2"))["status"] == "allowed"
        assert (await self.ask(bus, "s1", "c3", "fs::delete"))["status"] == "pending"
        assert (await self.ask(bus, "s2", "c2"))["status"] == "pending"
        # the call already pending stays pending until decided
        assert await self.pending_ids(bus, "s1") == ["s1/c1", "s1/c3"]

    # -- expiry --------------------------------------------------------------------------------
    async def test_a_pending_approval_expires_into_a_deny(self, fast_bus: Engine) -> None:
        await self.ask(fast_bus, "s1", "c1")

        async def decided() -> bool:
            return await self.decision_entry(fast_bus, "s1", "c1") is not None

        await wait_until(decided, message="the expiry sweep denied nothing")
        stored = await self.decision_entry(fast_bus, "s1", "c1")
        assert stored is not None
        assert stored[0]["decision"] == "deny"
        assert stored[0]["reason"] == "expired"
        assert await self.pending_ids(fast_bus) == []
        code = await self.resolve_code(fast_bus, "s1", "c1", "allow")
        assert code in ("already_decided", "expired")
        stored_after = await self.decision_entry(fast_bus, "s1", "c1")
        assert stored_after == stored
