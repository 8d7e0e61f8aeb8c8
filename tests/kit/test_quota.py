"""Rate limits and concurrency caps per tenant and user (``tackroom.kit.quota``), on each engine
backend: a minute's allowance refilling (the clock injected, never slept), tokens per minute,
all-or-nothing over user and tenant, compare-and-set races under ``asyncio.gather``, slots a dead
process left behind reclaimed from the run's own state, and two engine clients on one NATS server
sharing one limit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tackroom.contracts.principal import Principal
from tackroom.contracts.quota import RUNS, QuotaRefusal, subject_key
from tackroom.contracts.turn import TURN_GET_STATE
from tackroom.engine import Engine, RevisionConflict, StateEntry
from tackroom.kit.quota import (
    Admission,
    QuotaExceeded,
    QuotaLimits,
    QuotaSettings,
    acquire_run,
    admit_request,
    record_tokens,
    release_run,
)
from tackroom.testing import running_engine
from tackroom.testing.backends import BACKENDS, engine_url_for

T0 = 1_800_000_000.0
ALICE = Principal(id="alice", tenant="acme")
BOB = Principal(id="bob", tenant="acme")


@pytest.fixture(params=list(BACKENDS))
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    async with running_engine(engine_url_for(request.param, tmp_path)) as started:
        yield started


def settings(**limits: Any) -> QuotaSettings:
    return QuotaSettings.model_validate(limits)


async def refused(call: Any) -> QuotaRefusal:
    with pytest.raises(QuotaExceeded) as caught:
        await call
    assert caught.value.code == "quota_exceeded"
    return caught.value.refusal


# -- settings ---------------------------------------------------------------------------------


def test_an_entry_overrides_only_the_limits_it_names() -> None:
    config = settings(
        default={"tenant": {"requests_per_minute": 100, "max_concurrent_runs": 10}},
        tenants={"acme": {"requests_per_minute": 500}, "free": {"max_concurrent_runs": None}},
        users={"acme/alice": {"tokens_per_minute": 1000}},
    )
    acme, alice = config.limits_for(ALICE)
    assert acme == QuotaLimits(requests_per_minute=500, max_concurrent_runs=10)
    assert alice == QuotaLimits(tokens_per_minute=1000)
    free, _ = config.limits_for(Principal(id="x", tenant="free"))
    assert free == QuotaLimits(requests_per_minute=100)
    bad_names: list[dict[str, Any]] = [
        {"tenants": {"Acme": {}}},
        {"users": {"alice": {}}},
        {"users": {"acme/": {}}},
    ]
    for bad in bad_names:
        with pytest.raises(ValidationError, match="tenant"):
            settings(**bad)


def test_a_refusal_says_which_limit_whom_and_when() -> None:
    refusal = QuotaRefusal(
        kind="requests_per_minute",
        subject="user",
        tenant="acme",
        user="alice",
        limit=60,
        retry_after_seconds=0.2,
    )
    assert refusal.retry_after_header() == "1"
    assert refusal.message() == (
        "quota exceeded: user acme/alice is at its requests_per_minute limit (60); retry in 1 s"
    )


# -- rates ------------------------------------------------------------------------------------


async def test_a_minutes_allowance_refills_as_the_window_rolls(engine: Engine) -> None:
    config = settings(default={"user": {"requests_per_minute": 3}})
    admitted = [await admit_request(engine, principal=ALICE, settings=config, now=T0)]
    admitted += [await admit_request(engine, principal=ALICE, settings=config, now=T0 + 1)]
    admitted += [await admit_request(engine, principal=ALICE, settings=config, now=T0 + 2)]
    assert [a.requests_remaining for a in admitted] == [2, 1, 0]
    refusal = await refused(admit_request(engine, principal=ALICE, settings=config, now=T0 + 2))
    assert (refusal.kind, refusal.subject, refusal.user, refusal.limit) == (
        "requests_per_minute",
        "user",
        "alice",
        3,
    )
    assert refusal.retry_after_seconds == pytest.approx(18.0)  # one refills every 20 s
    assert (
        await admit_request(engine, principal=BOB, settings=config, now=T0 + 2)
    ).requests_remaining == 2
    await refused(admit_request(engine, principal=ALICE, settings=config, now=T0 + 19.9))
    await admit_request(engine, principal=ALICE, settings=config, now=T0 + 20)
    # A whole minute after the last request, the whole allowance is back.
    for offset in (80.0, 80.0, 80.0):
        await admit_request(engine, principal=ALICE, settings=config, now=T0 + offset)
    await refused(admit_request(engine, principal=ALICE, settings=config, now=T0 + 80))


async def test_the_tenants_limit_counts_all_its_users_and_refuses_all_or_nothing(
    engine: Engine,
) -> None:
    config = settings(
        default={"tenant": {"requests_per_minute": 2}, "user": {"requests_per_minute": 1}}
    )
    await admit_request(engine, principal=ALICE, settings=config, now=T0)
    await admit_request(engine, principal=BOB, settings=config, now=T0)
    carol = Principal(id="carol", tenant="acme")
    refusal = await refused(admit_request(engine, principal=carol, settings=config, now=T0))
    assert (refusal.subject, refusal.tenant, refusal.user) == ("tenant", "acme", None)
    assert refusal.retry_after_seconds == pytest.approx(30.0)
    # Carol's own allowance was given back: once the tenant's refills, she is admitted.
    await admit_request(engine, principal=carol, settings=config, now=T0 + 30)
    other = Principal(id="alice", tenant="other")
    await admit_request(engine, principal=other, settings=config, now=T0)  # another tenant


async def test_tokens_per_minute_hold_back_requests_until_paid_back(engine: Engine) -> None:
    config = settings(users={"acme/alice": {"tokens_per_minute": 1000}})
    first = await admit_request(engine, principal=ALICE, settings=config, now=T0)
    assert first == Admission(requests_remaining=None, tokens_remaining=1000)
    await record_tokens(engine, principal=ALICE, settings=config, tokens=2500, now=T0 + 1)
    refusal = await refused(admit_request(engine, principal=ALICE, settings=config, now=T0 + 1))
    assert (refusal.kind, refusal.limit) == ("tokens_per_minute", 1000)
    # 2500 tokens are 150 s of allowance; one token more fits 60 s before that is paid back.
    assert refusal.retry_after_seconds == pytest.approx(90.06)
    await refused(admit_request(engine, principal=ALICE, settings=config, now=T0 + 91))
    later = await admit_request(engine, principal=ALICE, settings=config, now=T0 + 91.1)
    assert later.tokens_remaining == 1
    # A request that needs room for 500 tokens waits until they have refilled.
    await refused(admit_request(engine, principal=ALICE, settings=config, now=T0 + 100, tokens=500))
    await admit_request(engine, principal=ALICE, settings=config, now=T0 + 121.1, tokens=500)
    await admit_request(engine, principal=BOB, settings=config, now=T0 + 1)  # no limit of his


async def test_concurrent_requests_race_by_compare_and_set_and_never_overshoot(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    conflicts = 0
    set_state = engine.set_state

    async def counting(
        scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        nonlocal conflicts
        try:
            return await set_state(scope, key, value, expected_revision=expected_revision)
        except RevisionConflict:
            conflicts += 1
            raise

    monkeypatch.setattr(engine, "set_state", counting)
    config = settings(default={"tenant": {"requests_per_minute": 20}})
    users = [Principal(id=f"u{i}", tenant="acme") for i in range(50)]
    outcomes = await asyncio.gather(
        *(admit_request(engine, principal=user, settings=config, now=T0) for user in users),
        return_exceptions=True,
    )
    admitted = [o for o in outcomes if isinstance(o, Admission)]
    assert len(admitted) == 20
    assert all(isinstance(o, QuotaExceeded) for o in outcomes if not isinstance(o, Admission))
    assert sorted(a.requests_remaining or 0 for a in admitted) == list(range(20))
    assert conflicts > 0  # the races really happened


# -- concurrency ------------------------------------------------------------------------------


def never_asked(session_id: str, run_id: str) -> Any:
    raise AssertionError(f"asked about {run_id} ({session_id})")


async def test_concurrent_runs_are_capped_and_released(engine: Engine) -> None:
    config = settings(users={"acme/alice": {"max_concurrent_runs": 2}})

    async def acquire(run: str, *, who: Principal = ALICE, at: float = T0) -> None:
        await acquire_run(
            engine,
            principal=who,
            settings=config,
            run_id=run,
            session_id=f"s-{run}",
            now=at,
            probe=never_asked,
        )

    await acquire("r1")
    await acquire("r2")
    await acquire("r2")  # again: it holds its slot already
    refusal = await refused(acquire("r3"))
    assert (refusal.kind, refusal.limit, refusal.retry_after_seconds) == (
        "max_concurrent_runs",
        2,
        5.0,
    )
    await acquire("b1", who=BOB)  # no cap of his
    await release_run(engine, principal=ALICE, settings=config, run_id="r1")
    await release_run(engine, principal=ALICE, settings=config, run_id="r1")  # twice: nothing
    await acquire("r3")
    await release_run(engine, principal=ALICE, settings=config, run_id="r2")
    await release_run(engine, principal=ALICE, settings=config, run_id="r3")
    assert await engine.get_state(RUNS.name, subject_key("acme", "alice")) is None


async def test_a_tenants_cap_refusing_gives_the_users_slot_back(engine: Engine) -> None:
    config = settings(
        default={"tenant": {"max_concurrent_runs": 1}, "user": {"max_concurrent_runs": 1}}
    )

    async def acquire(who: Principal, run: str) -> None:
        await acquire_run(
            engine,
            principal=who,
            settings=config,
            run_id=run,
            session_id=f"s-{run}",
            now=T0,
            probe=never_asked,
        )

    await acquire(ALICE, "a1")
    await refused(acquire(BOB, "b1"))
    assert await engine.get_state(RUNS.name, subject_key("acme", "bob")) is None


async def test_slots_a_dead_process_left_are_reclaimed_from_the_runs_state(
    engine: Engine,
) -> None:
    """The caller that acquired r1 and r2 died without releasing them."""
    config = settings(users={"acme/alice": {"max_concurrent_runs": 2}})
    for run in ("r1", "r2"):
        await acquire_run(
            engine, principal=ALICE, settings=config, run_id=run, session_id=f"s-{run}", now=T0
        )
    asked: list[str] = []
    over = {"r1": True, "r2": None}  # r1 has ended; r2's state cannot be read

    async def probe(session_id: str, run_id: str) -> bool | None:
        asked.append(run_id)
        return over[run_id]

    async def acquire(run: str, at: float) -> None:
        await acquire_run(
            engine,
            principal=ALICE,
            settings=config,
            run_id=run,
            session_id=f"s-{run}",
            now=at,
            probe=probe,
        )

    await refused(acquire("r3", T0 + 10))  # within the grace period: nothing asked
    assert asked == []
    await acquire("r3", T0 + 31)  # r1 is over: its slot is r3's
    assert sorted(asked) == ["r1", "r2"]
    slots = await engine.get_state(RUNS.name, subject_key("acme", "alice"))
    assert slots is not None
    assert sorted(slots.value["slots"]) == ["r2", "r3"]
    await refused(acquire("r4", T0 + 62))  # r2 unknown (kept), r3 still in its grace period
    await acquire("r4", T0 + 86_400)  # r2 is a day old: dropped without asking


async def test_the_default_probe_reads_the_runs_turn_state(engine: Engine) -> None:
    views = {
        "s-ended": {"run_id": "ended", "state": "stopped"},
        "s-replaced": {"run_id": "later", "state": "assistant_streaming"},
        "s-running": {"run_id": "running", "state": "function_awaiting_approval"},
    }

    async def get_state(payload: dict[str, Any]) -> dict[str, Any] | None:
        view = views.get(payload["session_id"])
        if view is None:
            return None
        return {
            "session_id": payload["session_id"],
            "step": 1,
            "turn_count": 1,
            "max_turns": 8,
            **view,
        }

    await engine.register_function(TURN_GET_STATE.id, get_state, worker="test")
    config = settings(default={"user": {"max_concurrent_runs": 4}})
    runs = ["ended", "replaced", "running", "never-started"]
    for run in runs:
        await acquire_run(
            engine, principal=ALICE, settings=config, run_id=run, session_id=f"s-{run}", now=T0
        )
    for run in ("n1", "n2", "n3"):
        await acquire_run(
            engine, principal=ALICE, settings=config, run_id=run, session_id="s-new", now=T0 + 60
        )
    await refused(
        acquire_run(
            engine, principal=ALICE, settings=config, run_id="n4", session_id="s-new", now=T0 + 60
        )
    )
    slots = await engine.get_state(RUNS.name, subject_key("acme", "alice"))
    assert slots is not None
    assert sorted(slots.value["slots"]) == ["n1", "n2", "n3", "running"]


async def test_racing_acquires_fill_the_cap_exactly(engine: Engine) -> None:
    config = settings(default={"tenant": {"max_concurrent_runs": 5}})
    users = [Principal(id=f"u{i}", tenant="acme") for i in range(20)]
    outcomes = await asyncio.gather(
        *(
            acquire_run(
                engine,
                principal=user,
                settings=config,
                run_id=f"r{i}",
                session_id=f"s{i}",
                now=T0,
                probe=never_asked,
            )
            for i, user in enumerate(users)
        ),
        return_exceptions=True,
    )
    assert outcomes.count(None) == 5
    assert all(isinstance(o, QuotaExceeded) for o in outcomes if o is not None)


# -- two replicas -----------------------------------------------------------------------------


async def test_two_engine_clients_on_one_nats_server_share_one_limit(tmp_path: Path) -> None:
    url = engine_url_for("nats", tmp_path)
    config = settings(
        default={"user": {"requests_per_minute": 4, "max_concurrent_runs": 1}},
    )
    async with running_engine(url) as first, running_engine(url) as second:
        replicas = [first, second]
        outcomes = await asyncio.gather(
            *(
                admit_request(replicas[i % 2], principal=ALICE, settings=config, now=T0)
                for i in range(10)
            ),
            return_exceptions=True,
        )
        assert sum(isinstance(o, Admission) for o in outcomes) == 4
        await refused(admit_request(second, principal=ALICE, settings=config, now=T0 + 1))

        async def acquire(replica: Engine, run: str) -> None:
            await acquire_run(
                replica,
                principal=ALICE,
                settings=config,
                run_id=run,
                session_id=f"s-{run}",
                now=T0,
                probe=never_asked,
            )

        await acquire(first, "r1")
        refusal = await refused(acquire(second, "r2"))
        assert refusal.kind == "max_concurrent_runs"
        await release_run(second, principal=ALICE, settings=config, run_id="r1")
        await acquire(second, "r2")
