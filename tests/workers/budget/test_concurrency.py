"""Reliability: 50 concurrent sessions against one small cap, through the bus, on two worker
replicas whose state access yields around every operation, so compare-and-set races happen."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from tackroom.engine import Engine, InvocationError
from tests.workers.budget.conftest import FakeClock, RacingBackend, start_replica
from tests.workers.sessions.fakes import WrappedBackend

CAP = 1.0
ESTIMATE = 0.05
SESSIONS = 50


async def run_sessions(
    engine: Engine, *, cost_factor: tuple[float, float], seed: int
) -> tuple[int, list[float]]:
    """Each session checks and records until it is denied; ``(allowed calls, costs recorded)``."""
    rng = random.Random(seed)
    recorded: list[float] = []
    allowed = 0

    async def session(index: int) -> None:
        nonlocal allowed
        chain = {"session_id": f"s{index}", "agent": "swarm", "workspace": "acme"}
        while True:
            request = {**chain, "estimate_usd": ESTIMATE}
            held = await engine.trigger("budget::check", request, timeout=30)
            if not held["allowed"]:
                assert held["reason"] == "budget_exceeded"
                return
            allowed += 1
            cost = rng.uniform(*cost_factor) * ESTIMATE
            for _ in range(rng.randint(0, 3)):  # the model call takes a while
                await asyncio.sleep(0)
            record = {**chain, "reservation_id": held["reservation_id"], "cost_usd": cost}
            await engine.trigger("budget::record", record, timeout=30)
            recorded.append(cost)

    await asyncio.gather(*(session(i) for i in range(SESSIONS)))
    return allowed, recorded


async def usage(engine: Engine, budget_id: str) -> dict[str, Any]:
    reply = await engine.trigger("budget::usage", {"budget_id": budget_id}, timeout=5)
    current: dict[str, Any] = reply["current"]
    return current


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_fifty_sessions_never_exceed_one_small_cap(
    engine: Engine, clock: FakeClock, seed: int
) -> None:
    backends = [RacingBackend(engine, seed=seed), RacingBackend(engine, seed=seed + 100)]
    replicas = [await start_replica(engine, clock, backend=b) for b in backends]
    try:
        agent = await engine.trigger(
            "budget::create", {"scope": "agent/swarm", "cap_usd": CAP}, timeout=5
        )
        workspace = await engine.trigger(
            "budget::create", {"scope": "workspace/acme", "cap_usd": 100.0}, timeout=5
        )
        allowed, costs = await run_sessions(engine, cost_factor=(0.5, 1.0), seed=seed)

        spent = (await usage(engine, agent["id"]))["spent_usd"]
        assert spent == pytest.approx(sum(costs))
        assert spent <= CAP + ESTIMATE  # the contract's bound
        assert spent <= CAP + 1e-9  # and with estimates that are upper bounds, never over
        assert allowed >= CAP / ESTIMATE / 2  # the cap was really used, not starved
        for budget_id in (agent["id"], workspace["id"]):
            current = await usage(engine, budget_id)
            assert current["reserved_usd"] == 0.0  # every hold settled or released
            assert current["records_count"] == allowed
        assert sum(b.conflicts for b in backends) > 0  # the races really happened
    finally:
        for ctx in replicas:
            await ctx.close()


async def test_one_estimate_bounds_overspend_when_calls_run_over(
    engine: Engine, clock: FakeClock
) -> None:
    """One call at a time, each costing more than estimated: the overspend is the last one's."""
    replica = await start_replica(engine, clock, backend=RacingBackend(engine, seed=9))
    try:
        made = await engine.trigger(
            "budget::create", {"scope": "session/s0", "cap_usd": CAP}, timeout=5
        )
        while True:
            request = {"session_id": "s0", "estimate_usd": ESTIMATE}
            held = await engine.trigger("budget::check", request, timeout=5)
            if not held["allowed"]:
                break
            record = {"session_id": "s0", "reservation_id": held["reservation_id"]}
            await engine.trigger(
                "budget::record", {**record, "cost_usd": ESTIMATE * 1.9}, timeout=5
            )
        spent = (await usage(engine, made["id"]))["spent_usd"]
        assert CAP - ESTIMATE < spent <= CAP + ESTIMATE
    finally:
        await replica.close()


async def test_a_check_that_fails_half_way_holds_nothing(engine: Engine, clock: FakeClock) -> None:
    backend = WrappedBackend(
        engine, crash_when=lambda op, scope, key: scope == "budget-reservations"
    )
    replica = await start_replica(engine, clock, backend=backend)
    try:
        made = [
            await engine.trigger("budget::create", {"scope": scope, "cap_usd": CAP}, timeout=5)
            for scope in ("session/s1", "agent/a")
        ]
        request = {"session_id": "s1", "agent": "a", "estimate_usd": 0.5}
        with pytest.raises(InvocationError) as failed:
            await engine.trigger("budget::check", request, timeout=5)
        assert "Crash" in str(failed.value)
        for budget in made:
            assert (await usage(engine, budget["id"]))["reserved_usd"] == 0.0
        again = await engine.trigger("budget::check", request, timeout=5)
        assert again["allowed"] is True
    finally:
        await replica.close()
