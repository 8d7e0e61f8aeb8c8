"""Deciding a parked call: through the approvals worker when it holds the call, else directly."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tackroom.contracts import approvals as c
from tackroom.engine import Engine, open_engine
from tackroom.harness.decisions import AlreadyDecided, decide
from tackroom.runtime import Host, load_worker


@pytest.fixture
async def with_approvals() -> AsyncIterator[Engine]:
    workers = [load_worker("engine"), load_worker("approvals")]
    async with Host(engine=open_engine("embedded::memory:"), workers=workers) as host:
        yield host.engine


async def test_run_answers_through_the_approvals_worker(with_approvals: Engine) -> None:
    bus = with_approvals
    request = {"session_id": "s1", "function_id": "fs::write", "run_id": "r"}
    await bus.trigger(c.REQUEST.id, {**request, "function_call_id": "c1"})
    await bus.trigger(c.REQUEST.id, {**request, "function_call_id": "c2"})

    await decide(
        bus, session_id="s1", function_call_id="c1", function_id="fs::write", decision="deny"
    )
    got = await bus.trigger(c.GET.id, {"session_id": "s1", "function_call_id": "c1"})
    assert got["pending"] is None
    assert got["decision"]["decision"] == "deny"
    assert got["decision"]["decided_at"] is not None

    await decide(
        bus,
        session_id="s1",
        function_call_id="c2",
        function_id="fs::write",
        decision="allow",
        always=True,
    )
    got = await bus.trigger(c.GET.id, {"session_id": "s1", "function_call_id": "c2"})
    assert got["decision"]["decision"] == "allow"
    settings = await bus.trigger(c.GET_SETTINGS.id, {"session_id": "s1"})
    assert settings["allowed_functions"] == ["fs::write"]

    # a turn that parked without the approvals layer (thin orchestrator): written directly
    await decide(
        bus, session_id="s1", function_call_id="c3", function_id="fs::write", decision="allow"
    )
    entry = await bus.get_state(c.DECISIONS_SCOPE.name, "s1/c3")
    assert entry is not None
    assert entry.value["decision"] == "allow"


async def test_run_answers_directly_without_the_approvals_worker() -> None:
    async with Host(engine=open_engine("embedded::memory:"), workers=[]) as host:
        bus = host.engine
        await decide(
            bus,
            session_id="s1",
            function_call_id="c1",
            function_id="fs::write",
            decision="allow",
            always=True,
        )
        entry = await bus.get_state(c.DECISIONS_SCOPE.name, "s1/c1")
        assert entry is not None
        assert entry.value["decision"] == "allow"
        assert entry.value["approver"]
        with pytest.raises(AlreadyDecided):  # create-only: a decision is never overwritten
            await decide(
                bus,
                session_id="s1",
                function_call_id="c1",
                function_id="fs::write",
                decision="deny",
            )
