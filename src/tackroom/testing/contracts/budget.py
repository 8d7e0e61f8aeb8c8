"""The contract of a budget worker (``budget::*``), by function id.

Any worker that replaces ``budget`` proves it fits by running this suite: subclass
:class:`BudgetContract` in a ``test_*.py`` module and name the worker::

    class TestMyBudget(BudgetContract):
        worker_name = "my-budget"

Every check goes through ``engine.trigger`` only. Period rollover needs a clock the suite cannot
move; the shipped worker's own tests cover it.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, ClassVar

import pytest

from tackroom.engine import Engine
from tackroom.testing import wait_until
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["BudgetContract"]


class BudgetContract(WorkerContract):
    worker_name: ClassVar[str] = "budget"

    # -- helpers -------------------------------------------------------------------------------
    async def budget(self, bus: Engine, scope: str, cap: float, **extra: Any) -> str:
        made = await self.call(bus, "budget::create", {"scope": scope, "cap_usd": cap, **extra})
        budget_id: str = made["id"]
        return budget_id

    async def budget_of(self, bus: Engine, scoped: dict[str, Any], cap: float) -> str:
        """A budget scoped by ``tenant``, ``user`` and/or ``agent`` instead of a scope."""
        made = await self.call(bus, "budget::create", {**scoped, "cap_usd": cap})
        budget_id: str = made["id"]
        return budget_id

    async def check(self, bus: Engine, estimate: float, **chain: Any) -> dict[str, Any]:
        request = {"session_id": "s1", **chain, "estimate_usd": estimate}
        result: dict[str, Any] = await self.call(bus, "budget::check", request)
        assert result["schema_version"] == 1
        return result

    async def record(self, bus: Engine, cost: float, **fields: Any) -> dict[str, Any]:
        request = {"session_id": "s1", **fields, "cost_usd": cost}
        result: dict[str, Any] = await self.call(bus, "budget::record", request)
        return result

    async def current(self, bus: Engine, budget_id: str) -> dict[str, Any]:
        usage = await self.call(bus, "budget::usage", {"budget_id": budget_id})
        current: dict[str, Any] = usage["current"]
        return current

    # -- budgets -------------------------------------------------------------------------------
    async def test_create_get_list_update_delete(self, bus: Engine) -> None:
        made = await self.call(
            bus,
            "budget::create",
            {"id": "team", "scope": "workspace/acme", "period": "day", "cap_usd": 5, "name": "t"},
        )
        assert made["schema_version"] == 2
        assert (made["id"], made["scope"], made["period"], made["cap_usd"]) == (
            "team", "workspace/acme", "day", 5
        )  # fmt: skip
        assert made["alert_thresholds"] == [0.5, 0.8, 1.0]
        assert (made["enforce"], made["paused"], made["exempt"]) == (True, False, False)
        assert await self.call(bus, "budget::get", {"budget_id": "team"}) == made
        other = await self.budget(bus, "agent/coder", 1)
        listed = await self.call(bus, "budget::list", {})
        assert {b["id"] for b in listed["budgets"]} == {"team", other}
        scoped = await self.call(bus, "budget::list", {"scope": "agent/"})
        assert [b["id"] for b in scoped["budgets"]] == [other]

        updated = await self.call(bus, "budget::update", {"budget_id": "team", "cap_usd": 7.5})
        assert (updated["cap_usd"], updated["period"], updated["name"]) == (7.5, "day", "t")
        deleted = await self.call(bus, "budget::delete", {"budget_id": "team"})
        assert deleted["deleted"] is True
        assert (await self.call(bus, "budget::delete", {"budget_id": "team"}))["deleted"] is False

    async def test_typed_errors(self, bus: Engine) -> None:
        await self.budget(bus, "session/s1", 1, id="b1")
        again = {"id": "b1", "scope": "session/s1", "cap_usd": 1}
        assert await self.code_of(bus, "budget::create", again) == "budget_exists"
        for fid in ("budget::get", "budget::usage", "budget::forecast", "budget::reset"):
            assert await self.code_of(bus, fid, {"budget_id": "nope"}) == "budget_not_found"
        missing_pause = {"budget_id": "nope", "paused": True}
        assert await self.code_of(bus, "budget::pause", missing_pause) == "budget_not_found"
        bad_scope = {"scope": "team/acme", "cap_usd": 1}
        assert await self.code_of(bus, "budget::create", bad_scope) == "invalid_request"
        zero_cap = {"scope": "session/s1", "cap_usd": 0}
        assert await self.code_of(bus, "budget::create", zero_cap) == "invalid_request"

    # -- check and record ----------------------------------------------------------------------
    async def test_no_budget_allows_without_a_reservation(self, bus: Engine) -> None:
        result = await self.check(bus, 100.0, agent="a", workspace="w")
        assert result["allowed"] is True
        assert result.get("reservation_id") is None
        assert (await self.record(bus, 3.0))["charged"] == []

    async def test_check_reserves_and_record_settles(self, bus: Engine) -> None:
        budget_id = await self.budget(bus, "session/s1", 1.0)
        first = await self.check(bus, 0.4)
        second = await self.check(bus, 0.4)
        assert first["allowed"]
        assert second["allowed"]
        assert first["reservation_id"] != second["reservation_id"]
        third = await self.check(bus, 0.4)  # 0.8 held + 0.4 > 1.0
        assert (third["allowed"], third["reason"], third["budget_id"]) == (
            False, "budget_exceeded", budget_id
        )  # fmt: skip
        assert third.get("reservation_id") is None
        now = await self.current(bus, budget_id)
        assert (now["spent_usd"], now["reserved_usd"]) == (0.0, pytest.approx(0.8))

        settled = await self.record(bus, 0.1, reservation_id=first["reservation_id"])
        assert [(c["budget_id"], c["spent_usd"]) for c in settled["charged"]] == [
            (budget_id, pytest.approx(0.1))
        ]
        now = await self.current(bus, budget_id)
        assert (now["spent_usd"], now["reserved_usd"]) == (
            pytest.approx(0.1), pytest.approx(0.4)
        )  # fmt: skip
        assert (await self.check(bus, 0.4))["allowed"] is True  # 0.1 + 0.4 + 0.4 fits

    async def test_record_is_idempotent_per_reservation(self, bus: Engine) -> None:
        budget_id = await self.budget(bus, "session/s1", 1.0)
        held = await self.check(bus, 0.2)
        await self.record(bus, 0.2, reservation_id=held["reservation_id"])
        again = await self.record(bus, 0.2, reservation_id=held["reservation_id"])
        assert again["charged"][0]["duplicate"] is True
        assert (await self.current(bus, budget_id))["spent_usd"] == pytest.approx(0.2)
        keyed = {"record_id": "call-7"}
        await self.record(bus, 0.3, **keyed)
        await self.record(bus, 0.3, **keyed)
        assert (await self.current(bus, budget_id))["spent_usd"] == pytest.approx(0.5)

    async def test_every_scope_of_the_chain_is_charged_all_or_nothing(self, bus: Engine) -> None:
        session = await self.budget(bus, "session/s1", 10.0)
        agent = await self.budget(bus, "agent/coder", 0.5)
        workspace = await self.budget(bus, "workspace/acme", 10.0)
        chain = {"agent": "coder", "workspace": "acme"}
        denied = await self.check(bus, 1.0, **chain)
        assert (denied["allowed"], denied["budget_id"]) == (False, agent)
        for budget_id in (session, agent, workspace):  # nothing stays held
            assert (await self.current(bus, budget_id))["reserved_usd"] == 0.0

        held = await self.check(bus, 0.3, **chain)
        assert held["allowed"] is True
        assert held["remaining_usd"] == pytest.approx(0.2)
        await self.record(bus, 0.25, reservation_id=held["reservation_id"], **chain)
        for budget_id in (session, agent, workspace):
            assert (await self.current(bus, budget_id))["spent_usd"] == pytest.approx(0.25)
        other_session = await self.check(bus, 0.3, session_id="s2", **chain)
        assert (other_session["allowed"], other_session["budget_id"]) == (False, agent)

    async def test_tenant_and_user_budgets_count_their_own_calls(self, bus: Engine) -> None:
        tenant = await self.budget_of(bus, {"tenant": "acme"}, 10.0)
        alice = await self.budget_of(bus, {"tenant": "acme", "user": "alice"}, 10.0)
        coder = await self.budget_of(bus, {"tenant": "acme", "agent": "coder"}, 10.0)
        made = await self.call(bus, "budget::get", {"budget_id": alice})
        assert (made["scope"], made["tenant"], made["user"]) == ("user/acme~alice", "acme", "alice")
        await self.record(bus, 1.0, tenant="acme", user="alice", agent="coder")
        await self.record(bus, 2.0, tenant="acme", user="bob", agent="writer")
        await self.record(bus, 4.0, tenant="other", user="alice", agent="coder")
        await self.record(bus, 8.0, agent="coder")  # no principal: no tenant's budget
        spent = {b: (await self.current(bus, b))["spent_usd"] for b in (tenant, alice, coder)}
        assert spent == {tenant: pytest.approx(3.0), alice: 1.0, coder: 1.0}
        listed = await self.call(bus, "budget::list", {"tenant": "acme"})
        assert {b["id"] for b in listed["budgets"]} == {tenant, alice, coder}
        assert (await self.call(bus, "budget::list", {"tenant": "other"}))["budgets"] == []

        capped = await self.budget_of(bus, {"tenant": "acme", "user": "bob"}, 0.5)
        assert (await self.check(bus, 0.1, tenant="acme", user="bob"))["allowed"] is True
        await self.record(bus, 0.5, tenant="acme", user="bob")
        denied = await self.check(bus, 0.1, tenant="acme", user="bob")
        assert (denied["allowed"], denied["budget_id"]) == (False, capped)
        assert (await self.check(bus, 0.1, tenant="acme", user="alice"))["allowed"] is True

    async def test_a_subagents_spend_counts_on_its_leads_budgets(self, bus: Engine) -> None:
        lead = await self.budget(bus, "session/lead", 1.0)
        grand = await self.budget(bus, "session/top", 1.0)
        lead_agent = await self.budget(bus, "agent/planner", 1.0)
        leads = [{"session_id": "lead", "agent": "planner"}, {"session_id": "top"}]
        held = await self.check(bus, 0.25, session_id="child", agent="helper", leads=leads)
        assert held["allowed"] is True
        await self.record(
            bus,
            0.2,
            session_id="child",
            agent="helper",
            leads=leads,
            reservation_id=held["reservation_id"],
        )
        for budget_id in (lead, grand, lead_agent):
            current = await self.current(bus, budget_id)
            assert (current["spent_usd"], current["reserved_usd"]) == (pytest.approx(0.2), 0.0)
        await self.record(bus, 0.8, session_id="lead", agent="planner", leads=leads[1:])
        refused = await self.check(bus, 0.0, session_id="child", agent="helper", leads=leads)
        assert (refused["allowed"], refused["budget_id"]) == (False, lead)

    async def test_a_cap_reached_denies_even_a_zero_estimate(self, bus: Engine) -> None:
        await self.budget(bus, "session/s1", 1.0)
        await self.record(bus, 1.0)
        assert (await self.check(bus, 0.0))["allowed"] is False

    async def test_pause_blocks_exempt_bypasses_enforce_off_tracks(self, bus: Engine) -> None:
        budget_id = await self.budget(bus, "session/s1", 1.0)
        await self.call(bus, "budget::pause", {"budget_id": budget_id, "paused": True})
        paused = await self.check(bus, 0.01)
        assert (paused["allowed"], paused["reason"]) == (False, "budget_paused")
        await self.call(bus, "budget::pause", {"budget_id": budget_id, "paused": False})
        assert (await self.check(bus, 0.01))["allowed"] is True

        await self.record(bus, 1.0)
        assert (await self.check(bus, 0.5))["allowed"] is False
        exempt = await self.call(bus, "budget::exempt", {"budget_id": budget_id, "exempt": True})
        assert exempt["exempt"] is True
        assert (await self.check(bus, 0.5))["allowed"] is True
        await self.record(bus, 0.5)  # still recorded while exempt
        assert (await self.current(bus, budget_id))["spent_usd"] == pytest.approx(1.5)
        await self.call(bus, "budget::exempt", {"budget_id": budget_id, "exempt": False})
        assert (await self.check(bus, 0.5))["allowed"] is False

        tracked = await self.call(
            bus, "budget::enforce", {"budget_id": budget_id, "enforce": False}
        )
        assert tracked["enforce"] is False
        assert (await self.check(bus, 5.0))["allowed"] is True

    async def test_reset_zeroes_the_period(self, bus: Engine) -> None:
        budget_id = await self.budget(bus, "session/s1", 1.0)
        await self.record(bus, 1.0)
        assert (await self.check(bus, 0.1))["allowed"] is False
        after = await self.call(bus, "budget::reset", {"budget_id": budget_id})
        assert after["spent_usd"] == 0.0
        assert (await self.check(bus, 0.1))["allowed"] is True

    async def test_alerts_fire_once_per_threshold(self, bus: Engine) -> None:
        alerts: list[dict[str, Any]] = []

        async def on_alert(event: Any) -> None:
            alerts.append(event)

        await bus.register_function("test::on_alert", on_alert, worker="contract-test")
        budget_id = await self.budget(bus, "session/s1", 1.0, alert_thresholds=[0.5])
        await self.call(
            bus,
            "budget::alert_set",
            {"budget_id": budget_id, "thresholds": [0.5, 1.0], "function_id": "test::on_alert"},
        )
        await self.record(bus, 0.3)
        first = await self.record(bus, 0.3)  # 0.6: crosses 0.5
        assert first["alerts"] == [0.5]
        second = await self.record(bus, 0.1)  # 0.7: nothing new
        assert second["alerts"] == []
        await self.record(bus, 0.5)  # 1.2: crosses 1.0
        await wait_until(lambda: len(alerts) >= 2)
        await self.record(bus, 0.5)
        await asyncio.sleep(0.05)
        assert sorted(a["threshold"] for a in alerts) == [0.5, 1.0]
        assert {a["budget_id"] for a in alerts} == {budget_id}
        assert all(a["schema_version"] == 1 and a["cap_usd"] == 1.0 for a in alerts)
        assert (await self.current(bus, budget_id))["fired_thresholds"] == [0.5, 1.0]

    async def test_forecast_projects_the_period(self, bus: Engine) -> None:
        budget_id = await self.budget(bus, "session/s1", 1.0, period="month")
        await self.record(bus, 0.2)
        forecast = await self.call(bus, "budget::forecast", {"budget_id": budget_id})
        assert forecast["spent_usd"] == pytest.approx(0.2)
        assert forecast["projected_usd"] >= forecast["spent_usd"]
        assert forecast["period_start"] < forecast["period_end"]
        assert forecast["on_track"] == (forecast["projected_usd"] <= 1.0)

    # -- concurrency ---------------------------------------------------------------------------
    async def test_concurrent_sessions_never_overspend(self, bus: Engine) -> None:
        cap, estimate = 1.0, 0.05
        budget_id = await self.budget(bus, "agent/swarm", cap)
        rng = random.Random(3)
        costs = [[rng.uniform(0.5, 1.0) * estimate for _ in range(40)] for _ in range(50)]

        async def session(index: int) -> None:
            chain = {"session_id": f"s{index}", "agent": "swarm"}
            for cost in costs[index]:
                held = await self.check(bus, estimate, **chain)
                if not held["allowed"]:
                    return
                await asyncio.sleep(0)
                await self.record(bus, cost, reservation_id=held["reservation_id"], **chain)

        await asyncio.gather(*(session(i) for i in range(50)))
        spent = (await self.current(bus, budget_id))["spent_usd"]
        assert spent <= cap + estimate + 1e-9
