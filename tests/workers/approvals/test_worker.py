"""The approvals worker beyond the contract: expiry on a hand-moved clock, races with real
interleaving, crash leftovers, restarts, events, config. No orchestrator: pending records are
made with ``approval::request``, as the orchestrator would."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts import approvals as c
from tackroom.contracts.events import EVENTS
from tackroom.engine import Engine, InvocationError
from tackroom.runtime import WorkerStartError, load_worker
from tackroom.testing import memory_engine
from tackroom.workers.approvals.worker import (
    WORKER,
    ApprovalsConfig,
    ApprovalsService,
    glob_matches,
)
from tests.workers.approvals.conftest import TTL, FakeClock, Interleaving, approvals_host

FUNCTION_IDS = [
    c.REQUEST.id,
    c.RESOLVE.id,
    c.LIST_PENDING.id,
    c.GET.id,
    c.SET_MODE.id,
    c.ALLOW_FOR_SESSION.id,
    c.GET_SETTINGS.id,
    c.SWEEP.id,
]


async def ask(bus: Engine, cid: str = "c1", sid: str = "s1", **extra: Any) -> dict[str, Any]:
    payload = {
        "session_id": sid,
        "function_call_id": cid,
        "function_id": "fs::write",
        "arguments": {"path": "a.txt"},
        "reason": "writes need approval",
        "run_id": "run-1",
        **extra,
    }
    reply: dict[str, Any] = await bus.trigger(c.REQUEST.id, payload)
    return reply


async def resolve(bus: Engine, decision: str, cid: str = "c1", **extra: Any) -> dict[str, Any]:
    payload = {"session_id": "s1", "function_call_id": cid, "decision": decision, **extra}
    reply: dict[str, Any] = await bus.trigger(c.RESOLVE.id, payload)
    return reply


async def code_of(bus: Engine, function_id: str, payload: Any) -> str:
    with pytest.raises(InvocationError) as caught:
        await bus.trigger(function_id, payload)
    return caught.value.remote_code


async def decision(bus: Engine, cid: str = "c1") -> dict[str, Any] | None:
    entry = await bus.get_state(c.DECISIONS_SCOPE.name, f"s1/{cid}")
    return None if entry is None else dict(entry.value)


async def pending_keys(bus: Engine) -> list[str]:
    return [entry.key for entry in await bus.list_state(c.PENDING_SCOPE.name)]


async def listed(bus: Engine) -> list[str]:
    reply = await bus.trigger(c.LIST_PENDING.id, {})
    return [p["function_call_id"] for p in reply["pending"]]


# -- the worker on the bus ---------------------------------------------------------------------


def test_the_registry_boots_this_worker() -> None:
    assert load_worker("approvals") is WORKER


def test_config_defaults() -> None:
    config = ApprovalsConfig()
    assert config.ttl_seconds == 900
    assert config.sweep_schedule == "*/5 * * * * *"
    assert config.default_mode == "manual"
    assert config.default_always_allow == []


async def test_catalog_lists_every_function_with_schemas(bus: Engine) -> None:
    functions = {info.function_id: info for info in await bus.list_functions()}
    for function_id in FUNCTION_IDS:
        info = functions[function_id]
        assert info.worker == "approvals"
        assert info.description
        assert info.request_schema
    resolve_schema = functions[c.RESOLVE.id].request_schema
    assert resolve_schema is not None
    decision_schema = resolve_schema["properties"]["decision"]
    assert decision_schema["enum"] == ["allow", "deny", "aborted"]


async def test_an_invalid_sweep_schedule_fails_the_start(clock: FakeClock) -> None:
    with pytest.raises(WorkerStartError):
        async with approvals_host(clock, sweep_schedule="every now and then"):
            pass


def test_globs_have_one_wildcard_and_match_whole_ids() -> None:
    assert glob_matches("fs::*", "fs::read")
    assert glob_matches("*::list", "engine::functions::list")
    assert glob_matches("*", "anything::at_all")
    assert glob_matches("fs::read", "fs::read")
    assert not glob_matches("fs::read", "fs::read_many")
    assert not glob_matches("fs::*", "xfs::read")
    assert not glob_matches("fs::?ead", "fs::read")  # `?` is a literal
    assert not glob_matches("fs::[r]ead", "fs::read")
    assert not glob_matches("fs.read", "fsxread")  # `.` is a literal


# -- request -----------------------------------------------------------------------------------


async def test_request_records_the_deadline_from_the_ttl(bus: Engine, clock: FakeClock) -> None:
    reply = await ask(bus)
    assert reply == {
        "schema_version": 1,
        "status": "pending",
        "reason": reply["reason"],
        "expires_at": clock.now + TTL,
    }
    entry = await bus.get_state(c.PENDING_SCOPE.name, "s1/c1")
    assert entry is not None
    assert entry.value == {
        "schema_version": 1,
        "session_id": "s1",
        "function_call_id": "c1",
        "function_id": "fs::write",
        "arguments": {"path": "a.txt"},
        "reason": "writes need approval",
        "run_id": "run-1",
        "requested_at": clock.now,
        "expires_at": clock.now + TTL,
    }
    clock.advance(5)
    assert (await ask(bus))["expires_at"] == clock.now - 5 + TTL  # the first deadline stands
    again = await bus.get_state(c.PENDING_SCOPE.name, "s1/c1")
    assert again is not None
    assert again.revision == entry.revision


async def test_request_of_a_decided_call_follows_the_decision(bus: Engine) -> None:
    await ask(bus, "c1")
    await resolve(bus, "allow", "c1")
    assert (await ask(bus, "c1"))["status"] == "allowed"
    await ask(bus, "c2")
    await resolve(bus, "deny", "c2")
    denied = await ask(bus, "c2")  # a re-run step parks it again and reads the deny at once
    assert denied["status"] == "pending"
    assert "deny" in denied["reason"]
    assert await pending_keys(bus) == []


async def test_the_default_mode_comes_from_the_config(clock: FakeClock) -> None:
    async with approvals_host(clock, default_mode="auto", default_always_allow=["calc::*"]) as h:
        bus = h.engine
        settings = await bus.trigger(c.GET_SETTINGS.id, {"session_id": "s1"})
        assert settings["mode"] == "auto"
        assert settings["always_allow"] == ["calc::*"]
        assert (await ask(bus, "c1", function_id="calc::add"))["status"] == "allowed"
        assert (await ask(bus, "c2"))["status"] == "pending"
        full = {"session_id": "s2", "mode": "full"}
        assert (await bus.trigger(c.SET_MODE.id, full))["always_allow"] == ["calc::*"]
        assert (await ask(bus, "c3", sid="s2"))["status"] == "allowed"


# -- expiry ------------------------------------------------------------------------------------


async def test_the_sweep_denies_what_outlived_its_ttl(bus: Engine, clock: FakeClock) -> None:
    await ask(bus, "c1")
    clock.advance(30)
    await ask(bus, "c2")
    clock.advance(TTL - 30 - 1)
    assert (await bus.trigger(c.SWEEP.id, {}))["expired"] == []
    assert await listed(bus) == ["c1", "c2"]

    clock.advance(1)  # c1's deadline
    assert await listed(bus) == ["c2"]  # an expired call can no longer be approved
    swept = await bus.trigger(c.SWEEP.id, {})
    assert swept["expired"] == [{"session_id": "s1", "function_call_id": "c1"}]
    record = await decision(bus, "c1")
    assert record is not None
    assert record["decision"] == "deny"
    assert record["reason"] == c.EXPIRED_REASON
    assert record["approver"] == c.EXPIRY_APPROVER
    assert record["decided_at"] == clock.now
    assert record["function_id"] == "fs::write"
    assert await pending_keys(bus) == ["s1/c2"]
    assert (await bus.trigger(c.SWEEP.id, {}))["expired"] == []
    assert await code_of(bus, c.RESOLVE.id, {**_ref("c1"), "decision": "allow"}) == (
        c.ALREADY_DECIDED_ERROR
    )


async def test_the_cron_payload_is_accepted_by_the_sweep(bus: Engine, clock: FakeClock) -> None:
    await ask(bus)
    clock.advance(TTL)
    fired = {"schedule": "*/5 * * * * *", "fired_at": "2026-01-01T00:00:00Z"}
    assert len((await bus.trigger(c.SWEEP.id, fired))["expired"]) == 1


async def test_a_late_resolve_expires_the_call(bus: Engine, clock: FakeClock) -> None:
    await ask(bus)
    clock.advance(TTL + 1)  # the sweep has not run yet
    assert await code_of(bus, c.RESOLVE.id, {**_ref("c1"), "decision": "allow"}) == c.EXPIRED_ERROR
    record = await decision(bus)
    assert record is not None
    assert (record["decision"], record["reason"]) == ("deny", c.EXPIRED_REASON)
    assert await pending_keys(bus) == []
    assert await code_of(bus, c.RESOLVE.id, {**_ref("c1"), "decision": "allow"}) == (
        c.ALREADY_DECIDED_ERROR
    )


async def test_the_sweep_leaves_a_person_s_decision_alone(bus: Engine, clock: FakeClock) -> None:
    await ask(bus)
    await resolve(bus, "allow", approver="alice")
    clock.advance(TTL * 2)
    assert (await bus.trigger(c.SWEEP.id, {}))["expired"] == []
    record = await decision(bus)
    assert record is not None
    assert (record["decision"], record["approver"]) == ("allow", "alice")


# -- races, with real interleaving ----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
async def test_racing_resolves_write_one_decision(seed: int, clock: FakeClock) -> None:
    async with memory_engine() as engine:
        backend = Interleaving(engine, seed=seed)
        service = ApprovalsService(backend, ApprovalsConfig(ttl_seconds=TTL), clock=clock)
        await service.request(_request("c1"))

        async def attempt(i: int) -> str:
            resolve = c.ResolveRequest(
                **_ref("c1"), decision="allow" if i % 2 else "deny", approver=f"user{i}"
            )
            try:
                record = await service.resolve(resolve)
            except Exception as exc:
                return str(getattr(exc, "code", exc))
            return f"won:{record.approver}"

        outcomes = await asyncio.gather(*(attempt(i) for i in range(6)))
        winners = [o for o in outcomes if o.startswith("won:")]
        assert len(winners) == 1, outcomes
        assert sorted(set(outcomes) - set(winners)) == [c.ALREADY_DECIDED_ERROR]
        assert backend.writes[c.DECISIONS_SCOPE.name] == 1
        stored = await engine.get_state(c.DECISIONS_SCOPE.name, "s1/c1")
        assert stored is not None
        assert f"won:{stored.value['approver']}" == winners[0]
        assert await engine.list_state(c.PENDING_SCOPE.name) == []
        events = await engine.read(EVENTS.name, "s1")
        assert len(events) == 1


@pytest.mark.parametrize("seed", range(6))
async def test_racing_sweeps_and_late_resolves_expire_once(seed: int, clock: FakeClock) -> None:
    async with memory_engine() as engine:
        backend = Interleaving(engine, seed=seed)
        service = ApprovalsService(backend, ApprovalsConfig(ttl_seconds=TTL), clock=clock)
        await service.request(_request("c1"))
        clock.advance(TTL)

        async def late_resolve() -> str:
            try:
                await service.resolve(c.ResolveRequest(**_ref("c1"), decision="allow"))
            except Exception as exc:
                return str(getattr(exc, "code", exc))
            return "won"

        async def sweep() -> str:
            return "swept" if (await service.sweep()).expired else "nothing"

        outcomes = await asyncio.gather(late_resolve(), sweep(), late_resolve(), sweep())
        assert backend.writes[c.DECISIONS_SCOPE.name] == 1, outcomes
        assert "won" not in outcomes
        assert set(outcomes) <= {c.EXPIRED_ERROR, c.ALREADY_DECIDED_ERROR, "swept", "nothing"}
        assert outcomes.count(c.EXPIRED_ERROR) + outcomes.count("swept") == 1, outcomes
        stored = await engine.get_state(c.DECISIONS_SCOPE.name, "s1/c1")
        assert stored is not None
        assert stored.value["reason"] == c.EXPIRED_REASON
        assert await engine.list_state(c.PENDING_SCOPE.name) == []


@pytest.mark.parametrize("seed", range(6))
async def test_racing_requests_record_one_pending(seed: int, clock: FakeClock) -> None:
    async with memory_engine() as engine:
        backend = Interleaving(engine, seed=seed)
        service = ApprovalsService(backend, ApprovalsConfig(ttl_seconds=TTL), clock=clock)
        replies = await asyncio.gather(*(service.request(_request("c1")) for _ in range(4)))
        assert {reply.status for reply in replies} == {"pending"}
        assert backend.writes[c.PENDING_SCOPE.name] == 1


@pytest.mark.parametrize("seed", range(12))
async def test_a_re_request_racing_a_resolve_leaves_no_pending(seed: int, clock: FakeClock) -> None:
    """A re-run step asks again while the person decides: the decision stands, and no pending
    record outlives it."""
    async with memory_engine() as engine:
        backend = Interleaving(engine, seed=seed)
        service = ApprovalsService(backend, ApprovalsConfig(ttl_seconds=TTL), clock=clock)
        await service.request(_request("c1"))
        reply, record = await asyncio.gather(
            service.request(_request("c1")),
            service.resolve(c.ResolveRequest(**_ref("c1"), decision="allow")),
        )
        assert record.decision == "allow"
        assert reply.status in ("pending", "allowed")
        assert await engine.list_state(c.PENDING_SCOPE.name) == []
        assert backend.writes[c.DECISIONS_SCOPE.name] == 1
        assert (await service.request(_request("c1"))).status == "allowed"


@pytest.mark.parametrize("seed", range(6))
async def test_settings_updates_do_not_lose_each_other(seed: int, clock: FakeClock) -> None:
    async with memory_engine() as engine:
        backend = Interleaving(engine, seed=seed)
        service = ApprovalsService(backend, ApprovalsConfig(), clock=clock)
        names = [f"fn::{i}" for i in range(5)]
        await asyncio.gather(
            *(
                service.allow_for_session(c.AllowForSessionRequest(session_id="s1", function_id=n))
                for n in names
            ),
            service.set_mode(c.SetModeRequest(session_id="s1", mode="auto", always_allow=["x*"])),
        )
        settings = await service.settings("s1")
        assert sorted(settings.allowed_functions) == names
        assert (settings.mode, settings.always_allow) == ("auto", ["x*"])


# -- crash leftovers, restarts, events ----------------------------------------------------------


async def test_a_pending_record_left_beside_its_decision(bus: Engine) -> None:
    """A crash between writing the decision and deleting the pending record."""
    await ask(bus)
    pending = await bus.get_state(c.PENDING_SCOPE.name, "s1/c1")
    assert pending is not None
    await resolve(bus, "allow")
    await bus.set_state(c.PENDING_SCOPE.name, "s1/c1", pending.value)  # the delete "never happened"

    assert await listed(bus) == []
    assert (await ask(bus))["status"] == "allowed"
    assert await code_of(bus, c.RESOLVE.id, {**_ref("c1"), "decision": "deny"}) == (
        c.ALREADY_DECIDED_ERROR
    )
    assert (await bus.trigger(c.SWEEP.id, {}))["expired"] == []
    assert await pending_keys(bus) == []


async def test_unreadable_records_are_skipped(bus: Engine) -> None:
    await bus.set_state(c.PENDING_SCOPE.name, "s1/junk", {"not": "a record"})
    await ask(bus)
    assert await listed(bus) == ["c1"]
    assert (await bus.trigger(c.SWEEP.id, {}))["expired"] == []
    assert await code_of(bus, c.RESOLVE.id, {**_ref("junk"), "decision": "allow"}) == (
        c.NOT_PENDING_ERROR
    )


async def test_pending_approvals_survive_a_restart(tmp_path: Path, clock: FakeClock) -> None:
    url = f"embedded:{tmp_path / 'engine.db'}"
    async with approvals_host(clock, url) as host:
        await ask(host.engine, "c1")
        await ask(host.engine, "c2")
        await host.engine.trigger(
            c.ALLOW_FOR_SESSION.id, {"session_id": "s1", "function_id": "x::y"}
        )

    async with approvals_host(clock, url) as host:  # a new process: nothing in memory
        assert await listed(host.engine) == ["c1", "c2"]
        await resolve(host.engine, "allow", "c1", approver="alice")
        assert (await ask(host.engine, "c3", function_id="x::y"))["status"] == "allowed"

    clock.advance(TTL)  # c2 expires while every process is down
    async with approvals_host(clock, url) as host:
        got = await host.engine.trigger(c.GET.id, _ref("c1"))
        assert got["pending"] is None
        assert (got["decision"]["decision"], got["decision"]["approver"]) == ("allow", "alice")
        assert await listed(host.engine) == []
        swept = await host.engine.trigger(c.SWEEP.id, {})
        assert swept["expired"] == [{"session_id": "s1", "function_call_id": "c2"}]


async def test_a_decision_is_announced_on_agent_events(bus: Engine, clock: FakeClock) -> None:
    await ask(bus, "c1")
    await resolve(bus, "deny", "c1", approver="bob", reason="not now")
    [record] = await bus.read(EVENTS.name, "s1")
    assert record.data == {
        "schema_version": 1,
        "type": "approval_resolved",
        "session_id": "s1",
        "run_id": "run-1",
        "event_id": "run-1:approval:c1",
        "data": {
            "function_call_id": "c1",
            "function_id": "fs::write",
            "decision": "deny",
            "reason": "not now",
            "approver": "bob",
            "decided_at": clock.now,
        },
    }
    await ask(bus, "c2", run_id=None)  # no run to attach the event to: none is appended
    await resolve(bus, "allow", "c2")
    assert len(await bus.read(EVENTS.name, "s1")) == 1


async def test_a_decision_without_approver_is_recorded_as_unknown(bus: Engine) -> None:
    await ask(bus)
    assert (await resolve(bus, "allow"))["approver"] == "unknown"


def _ref(cid: str) -> dict[str, str]:
    return {"session_id": "s1", "function_call_id": cid}


def _request(cid: str) -> c.ApprovalRequest:
    return c.ApprovalRequest(
        **_ref(cid), function_id="fs::write", arguments={"path": "a.txt"}, run_id="run-1"
    )
