"""Periods on UTC boundaries, rollover, alerts once per period, expiring holds, forecasts."""

from __future__ import annotations

from typing import Any

import pytest

from tackroom.contracts.budget import period_bounds, period_key
from tackroom.engine import Engine
from tackroom.testing import wait_until
from tests.workers.budget.conftest import FakeClock, utc


@pytest.mark.parametrize(
    ("period", "when", "key", "start", "end"),
    [
        ("day", "2026-11-30 23:59:59", "2026-11-30", "2026-11-30 00:00", "2026-12-01 00:00"),
        ("week", "2026-12-06 23:59:59", "2026-W49", "2026-11-30 00:00", "2026-12-07 00:00"),
        ("week", "2027-01-01 12:00:00", "2026-W53", "2026-12-28 00:00", "2027-01-04 00:00"),
        ("week", "2027-01-04 00:00:00", "2027-W01", "2027-01-04 00:00", "2027-01-11 00:00"),
        ("month", "2026-12-31 23:59:59", "2026-12", "2026-12-01 00:00", "2027-01-01 00:00"),
        ("month", "2028-02-29 10:00:00", "2028-02", "2028-02-01 00:00", "2028-03-01 00:00"),
    ],
)
def test_period_keys_and_bounds_are_utc(
    period: Any, when: str, key: str, start: str, end: str
) -> None:
    assert period_key(period, utc(when)) == key
    assert period_bounds(period, utc(when), origin=0) == (utc(start), utc(end))


def test_total_never_rolls_over() -> None:
    assert period_key("total", utc("2030-01-01 00:00:00")) == "total"
    assert period_bounds("total", utc("2030-01-01 00:00:00"), origin=5.0) == (5.0, None)


async def call(engine: Engine, function_id: str, payload: Any) -> Any:
    return await engine.trigger(function_id, payload, timeout=5)


async def check(engine: Engine, estimate: float) -> dict[str, Any]:
    result: dict[str, Any] = await call(
        engine, "budget::check", {"session_id": "s1", "estimate_usd": estimate}
    )
    return result


async def record(engine: Engine, cost: float, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = await call(
        engine, "budget::record", {"session_id": "s1", "cost_usd": cost, **extra}
    )
    return result


@pytest.mark.parametrize(
    ("period", "before", "after"),
    [
        ("day", "2026-11-30 23:59:59", "2026-12-01 00:00:00"),
        ("week", "2026-12-06 23:59:59", "2026-12-07 00:00:00"),  # Sunday → Monday
        ("month", "2026-12-31 23:59:59", "2027-01-01 00:00:00"),
    ],
)
async def test_spend_rolls_over_at_the_utc_boundary(
    bus: Engine, clock: FakeClock, period: str, before: str, after: str
) -> None:
    made = await call(
        bus, "budget::create", {"scope": "session/s1", "cap_usd": 1.0, "period": period}
    )
    clock.set(before)
    await record(bus, 1.0)
    assert (await check(bus, 0.1))["allowed"] is False
    clock.set(after)
    assert (await check(bus, 0.1))["allowed"] is True
    usage = await call(bus, "budget::usage", {"budget_id": made["id"]})
    assert usage["current"]["period_key"] == period_key(made["period"], utc(after))
    assert usage["current"]["spent_usd"] == 0.0
    assert [(h["period_key"], h["spent_usd"]) for h in usage["history"]] == [
        (period_key(made["period"], utc(before)), 1.0)
    ]


async def test_a_call_that_straddles_midnight_settles_where_it_was_held(
    bus: Engine, clock: FakeClock
) -> None:
    made = await call(
        bus, "budget::create", {"scope": "session/s1", "cap_usd": 1.0, "period": "day"}
    )
    clock.set("2026-11-30 23:59:59")
    held = await check(bus, 0.5)
    clock.set("2026-12-01 00:00:05")
    charged = await record(bus, 0.4, reservation_id=held["reservation_id"])
    assert [c["period_key"] for c in charged["charged"]] == ["2026-11-30"]
    usage = await call(bus, "budget::usage", {"budget_id": made["id"]})
    assert usage["current"]["spent_usd"] == 0.0
    assert usage["history"][0]["spent_usd"] == 0.4
    assert usage["history"][0]["reserved_usd"] == 0.0


async def test_alerts_fire_once_per_period(bus: Engine, clock: FakeClock) -> None:
    alerts: list[dict[str, Any]] = []

    async def on_alert(event: Any) -> None:
        alerts.append(event)

    await bus.register_function("test::alert", on_alert, worker="test")
    await call(
        bus,
        "budget::create",
        {
            "scope": "session/s1",
            "cap_usd": 1.0,
            "period": "day",
            "alert_thresholds": [0.5],
            "alert_function": "test::alert",
        },
    )
    for _ in range(4):
        await record(bus, 0.2)  # 0.2 0.4 | 0.6 0.8: one crossing
    clock.advance(86_400)
    for _ in range(4):
        await record(bus, 0.2)
    await wait_until(lambda: len(alerts) >= 2)
    assert [(a["period_key"], a["threshold"]) for a in alerts] == [
        ("2026-11-30", 0.5),
        ("2026-12-01", 0.5),
    ]
    assert alerts[0]["spent_usd"] == pytest.approx(0.6)


async def test_a_crashed_callers_hold_expires(bus: Engine, clock: FakeClock) -> None:
    made = await call(bus, "budget::create", {"scope": "session/s1", "cap_usd": 1.0})
    held = await check(bus, 0.9)  # ... and the caller dies: no record
    assert (await check(bus, 0.5))["allowed"] is False
    clock.advance(599)
    assert (await check(bus, 0.5))["allowed"] is False
    clock.advance(2)  # the default TTL is 600 s
    again = await check(bus, 0.5)
    assert again["allowed"] is True

    # a late record still charges what was spent, once
    await record(bus, 0.3, reservation_id=held["reservation_id"])
    await record(bus, 0.3, reservation_id=held["reservation_id"])
    usage = await call(bus, "budget::usage", {"budget_id": made["id"]})
    assert usage["current"]["spent_usd"] == pytest.approx(0.3)
    assert usage["current"]["reserved_usd"] == pytest.approx(0.5)

    clock.advance(601)
    swept = await call(bus, "budget::sweep", {})
    assert swept["deleted"] == 2
    assert await bus.list_state("budget-reservations") == []


async def test_a_check_can_ask_for_a_shorter_hold(bus: Engine, clock: FakeClock) -> None:
    await call(bus, "budget::create", {"scope": "session/s1", "cap_usd": 1.0})
    request = {"session_id": "s1", "estimate_usd": 0.9, "ttl_s": 30}
    assert (await call(bus, "budget::check", request))["allowed"] is True
    clock.advance(31)
    assert (await check(bus, 0.9))["allowed"] is True


async def test_exemption_ends_at_its_time(bus: Engine, clock: FakeClock) -> None:
    made = await call(bus, "budget::create", {"scope": "session/s1", "cap_usd": 1.0})
    await record(bus, 1.0)
    until = clock.now + 3600
    await call(bus, "budget::exempt", {"budget_id": made["id"], "until": until})
    assert (await check(bus, 0.5))["allowed"] is True
    clock.advance(3601)
    assert (await check(bus, 0.5))["allowed"] is False


async def test_forecast_is_linear_over_the_period(bus: Engine, clock: FakeClock) -> None:
    made = await call(
        bus, "budget::create", {"scope": "session/s1", "cap_usd": 10.0, "period": "month"}
    )
    clock.set("2026-11-11 00:00:00")  # 10 of November's 30 days gone
    await record(bus, 4.0)
    forecast = await call(bus, "budget::forecast", {"budget_id": made["id"]})
    assert forecast["period_key"] == "2026-11"
    assert forecast["projected_usd"] == pytest.approx(12.0)
    assert forecast["on_track"] is False
    assert forecast["exhausts_at"] == pytest.approx(utc("2026-11-26 00:00:00"))

    total = await call(bus, "budget::create", {"scope": "agent/a", "cap_usd": 5, "period": "total"})
    later = await call(bus, "budget::forecast", {"budget_id": total["id"]})
    assert (later["period_end"], later["projected_usd"], later["on_track"]) == (None, 0.0, True)


async def test_reset_keeps_history_honest(bus: Engine, clock: FakeClock) -> None:
    made = await call(bus, "budget::create", {"scope": "session/s1", "cap_usd": 1.0})
    await record(bus, 0.7)
    reset = await call(bus, "budget::reset", {"budget_id": made["id"]})
    assert (reset["spent_usd"], reset["reset_count"]) == (0.0, 1)
    stored = await bus.list_state("budget-usage", prefix=f"{made['id']}/")
    assert stored[0].value["spent_before_reset_usd"] == pytest.approx(0.7)
    assert stored[0].value["schema_version"] == 1
