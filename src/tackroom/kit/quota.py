"""Rate limits and a concurrency cap per tenant and per user, shared by every process on an engine.

Limits (:class:`QuotaLimits`): ``requests_per_minute``, ``tokens_per_minute``,
``max_concurrent_runs``. A principal is held to its tenant's limits (counted over all the
tenant's users) and to its own (:class:`QuotaSettings`: defaults for every tenant and every user,
entries per tenant and per ``tenant/user``). The counts live in the engine's state
(:mod:`tackroom.contracts.quota`) and every write is compare-and-set, retried a bounded number of
times, so any number of processes sharing one engine — gateway replicas on one NATS server — share
one count.

**Rates** are a minute's allowance refilled continuously (GCRA): ``requests_per_minute: 60``
lets 60 requests through at once, then one a second. :func:`admit_request` takes one request and
needs room for ``tokens`` (default 1) under ``tokens_per_minute``; :func:`record_tokens` charges
the tokens a run used once it is known — a run that used three minutes' worth holds the next
requests back about two minutes. A refusal raises :class:`QuotaExceeded` with the limit, the
tenant or user, and ``retry_after_seconds``: exactly when the allowance has room again.

**Concurrency slots cannot leak.** :func:`acquire_run` records a slot under the run's id (and
session); :func:`release_run` drops it when the caller sees the run end. A caller that dies first
leaves its slot behind, so a slot is never trusted when it would refuse: when the cap is reached,
each slot older than ``slot_grace_seconds`` is checked against its run's own durable record
(``turn::get_state`` by default: the session's current run is another, or it has stopped or
failed, or there is none) and dropped if that run is over. The run's record is the truth a crash
cannot falsify, and no process has to stay alive to keep anything fresh (a lease would need a
refresher per run, and would expire under a run parked for approval for hours). The grace
period covers the moment between acquiring a slot and starting its run. A run whose state cannot
be read (no orchestrator answering) keeps its slot, and a slot older than
``slot_max_age_seconds`` is dropped whatever, so a cap is never held shut for good.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.principal import Principal
from tackroom.contracts.quota import (
    RATES,
    RUNS,
    QuotaRefusal,
    RateState,
    RunSlot,
    RunSlots,
    subject_key,
)
from tackroom.contracts.turn import TURN_GET_STATE, TurnStateRequest
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine
from tackroom.kit.cas import DELETE, UNCHANGED, mutate
from tackroom.kit.quota_base import (
    QuotaContention,
    QuotaDefaults,
    QuotaExceeded,
    QuotaLimits,
    QuotaSettings,
    Subject,
    subjects,
)

__all__ = [
    "WINDOW_SECONDS",
    "Admission",
    "QuotaContention",
    "QuotaDefaults",
    "QuotaExceeded",
    "QuotaLimits",
    "QuotaRefusal",
    "QuotaSettings",
    "RunProbe",
    "acquire_run",
    "admit_request",
    "record_tokens",
    "release_run",
    "turn_state_probe",
]

WINDOW_SECONDS = 60.0
_EPSILON = 1e-6

RunProbe = Callable[[str, str], Awaitable[bool | None]]
"""``(session_id, run_id)`` → the run is over (``True``), on (``False``) or unknown (``None``)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """What is left right after an admitted request (``None``: no such limit applies)."""

    requests_remaining: int | None = None
    tokens_remaining: int | None = None


# -- the rate arithmetic (GCRA): pure ---------------------------------------------------------


def _after(tat: float, now: float, amount: float, limit: int) -> float:
    """The allowance's "whole again" time once ``amount`` more is taken at ``now``."""
    return max(tat, now) + amount * WINDOW_SECONDS / limit


def _wait(tat: float, now: float, amount: float, limit: int) -> float:
    """Seconds until ``amount`` (at most a whole minute's) fits; 0: it fits now."""
    wait = _after(tat, now, min(amount, limit), limit) - now - WINDOW_SECONDS
    return wait if wait > _EPSILON else 0.0


def _left(tat: float, now: float, limit: int) -> int:
    """Whole units that fit at ``now``."""
    room = (now + WINDOW_SECONDS - max(tat, now)) * limit / WINDOW_SECONDS
    return max(0, math.floor(room + _EPSILON))


# -- rates ------------------------------------------------------------------------------------


async def admit_request(
    engine: Engine,
    *,
    principal: Principal,
    settings: QuotaSettings,
    now: float | None = None,
    tokens: int = 1,
) -> Admission:
    """Take one request from the user's and the tenant's ``requests_per_minute``, if room for
    ``tokens`` is left under their ``tokens_per_minute``; else raise :class:`QuotaExceeded`
    (with nothing taken)."""
    at = time.time() if now is None else now
    if not settings.enabled:
        return Admission()
    taken: list[Subject] = []
    requests_left: list[int] = []
    tokens_left: list[int] = []
    try:
        for subject in subjects(settings, principal):
            rpm = subject.limits.requests_per_minute
            tpm = subject.limits.tokens_per_minute
            if rpm is None and tpm is None:
                continue

            def take(value: Any, s: Subject = subject) -> tuple[Any, tuple[int | None, int | None]]:
                return _take(s, RateState.model_validate(value or {}), at, tokens)

            left, tokens_room = await mutate(
                engine, RATES.name, subject.key, take, attempts=settings.max_attempts
            )
            if rpm is not None:
                taken.append(subject)
            requests_left.extend([] if left is None else [left])
            tokens_left.extend([] if tokens_room is None else [tokens_room])
    except BaseException:
        for subject in taken:  # all or nothing: give the requests already taken back
            await _give_back(engine, subject, attempts=settings.max_attempts)
        raise
    return Admission(
        requests_remaining=min(requests_left, default=None),
        tokens_remaining=min(tokens_left, default=None),
    )


def _take(
    subject: Subject, state: RateState, now: float, tokens: int
) -> tuple[Any, tuple[int | None, int | None]]:
    rpm, tpm = subject.limits.requests_per_minute, subject.limits.tokens_per_minute
    tokens_room = None
    if tpm is not None:
        wait = _wait(state.tokens_tat, now, max(tokens, 1), tpm)
        if wait:
            raise subject.exceeded("tokens_per_minute", tpm, wait)
        tokens_room = _left(state.tokens_tat, now, tpm)
    if rpm is None:
        return UNCHANGED, (None, tokens_room)
    wait = _wait(state.requests_tat, now, 1, rpm)
    if wait:
        raise subject.exceeded("requests_per_minute", rpm, wait)
    tat = _after(state.requests_tat, now, 1, rpm)
    updated = state.model_copy(update={"requests_tat": tat})
    return updated.model_dump(mode="json"), (_left(tat, now, rpm), tokens_room)


async def _give_back(engine: Engine, subject: Subject, *, attempts: int) -> None:
    rpm = subject.limits.requests_per_minute
    assert rpm is not None

    def undo(value: Any) -> tuple[Any, None]:
        if value is None:
            return UNCHANGED, None
        state = RateState.model_validate(value)
        tat = state.requests_tat - WINDOW_SECONDS / rpm
        return state.model_copy(update={"requests_tat": tat}).model_dump(mode="json"), None

    await mutate(engine, RATES.name, subject.key, undo, attempts=attempts)


async def record_tokens(
    engine: Engine,
    *,
    principal: Principal,
    settings: QuotaSettings,
    tokens: int,
    now: float | None = None,
) -> None:
    """Charge ``tokens`` used to the user's and the tenant's ``tokens_per_minute`` (beyond a
    minute's worth too: later requests then wait until it has been paid back)."""
    at = time.time() if now is None else now
    if not settings.enabled or tokens <= 0:
        return
    for subject in subjects(settings, principal):
        tpm = subject.limits.tokens_per_minute
        if tpm is None:
            continue

        def charge(value: Any, tpm: int = tpm) -> tuple[Any, None]:
            state = RateState.model_validate(value or {})
            tat = _after(state.tokens_tat, at, tokens, tpm)
            return state.model_copy(update={"tokens_tat": tat}).model_dump(mode="json"), None

        await mutate(engine, RATES.name, subject.key, charge, attempts=settings.max_attempts)


# -- concurrency ------------------------------------------------------------------------------


def turn_state_probe(engine: Engine, *, timeout: float = 2.0) -> RunProbe:
    """Whether a run is over, from ``turn::get_state`` of its session."""

    async def ended(session_id: str, run_id: str) -> bool | None:
        try:
            view = await TURN_GET_STATE.call(
                engine, TurnStateRequest(session_id=session_id), timeout=timeout
            )
        except EngineError:
            return None
        if view is None or view.run_id != run_id:
            return True  # never started, or another run followed it: over
        return view.state in ("stopped", "failed")

    return ended


async def acquire_run(
    engine: Engine,
    *,
    principal: Principal,
    settings: QuotaSettings,
    run_id: str,
    session_id: str,
    now: float | None = None,
    probe: RunProbe | None = None,
) -> None:
    """Hold a slot for ``run_id`` under the user's and the tenant's ``max_concurrent_runs``, or
    raise :class:`QuotaExceeded` (with nothing held). Acquiring a run's slot again is a no-op.
    ``session_id`` is the run's stored session id (what ``turn::get_state`` takes)."""
    at = time.time() if now is None else now
    if not settings.enabled:
        return
    ask = turn_state_probe(engine) if probe is None else probe
    held: list[Subject] = []
    try:
        for subject in subjects(settings, principal):
            cap = subject.limits.max_concurrent_runs
            if cap is None:
                continue
            slot = RunSlot(session_id=session_id, acquired_at=at)
            await _hold(engine, subject, cap, run_id, slot, settings=settings, probe=ask)
            held.append(subject)
    except BaseException:
        for subject in held:
            await _drop(engine, subject.key, run_id, attempts=settings.max_attempts)
        raise


class _Full(Exception):
    def __init__(self, live: dict[str, RunSlot]) -> None:
        super().__init__("full")
        self.live = live


async def _hold(
    engine: Engine,
    subject: Subject,
    cap: int,
    run_id: str,
    slot: RunSlot,
    *,
    settings: QuotaSettings,
    probe: RunProbe,
) -> None:
    over: set[str] = set()  # runs found over (a run that is over stays over)

    def take(value: Any) -> tuple[Any, None]:
        slots = RunSlots.model_validate(value or {}).slots
        if run_id in slots:
            return UNCHANGED, None
        live = {
            rid: held
            for rid, held in slots.items()
            if rid not in over
            and slot.acquired_at - held.acquired_at < settings.slot_max_age_seconds
        }
        if len(live) >= cap:
            raise _Full(live)
        return RunSlots(slots={**live, run_id: slot}).model_dump(mode="json"), None

    for last in (False, True):
        try:
            await mutate(engine, RUNS.name, subject.key, take, attempts=settings.max_attempts)
            return
        except _Full as full:
            found = (
                set()
                if last
                else await _over(full.live, now=slot.acquired_at, settings=settings, probe=probe)
            )
            if not found:
                raise subject.exceeded(
                    "max_concurrent_runs", cap, settings.concurrency_retry_after_seconds
                ) from None
            over.update(found)


async def _over(
    live: dict[str, RunSlot], *, now: float, settings: QuotaSettings, probe: RunProbe
) -> set[str]:
    """The runs among ``live`` past their grace period that are over."""
    old = [
        (rid, held)
        for rid, held in live.items()
        if now - held.acquired_at >= settings.slot_grace_seconds
    ]
    answers = await asyncio.gather(
        *(probe(held.session_id, rid) for rid, held in old), return_exceptions=True
    )
    return {rid for (rid, _), answer in zip(old, answers, strict=True) if answer is True}


async def release_run(
    engine: Engine, *, principal: Principal, settings: QuotaSettings, run_id: str
) -> None:
    """Give back the run's slots (nothing if it holds none): call it once the run has ended, or
    when it did not start."""
    for key in (subject_key(principal.tenant, principal.id), subject_key(principal.tenant)):
        await _drop(engine, key, run_id, attempts=settings.max_attempts)


async def _drop(engine: Engine, key: str, run_id: str, *, attempts: int) -> None:
    def drop(value: Any) -> tuple[Any, None]:
        slots = RunSlots.model_validate(value or {}).slots
        if run_id not in slots:
            return UNCHANGED, None
        rest = {rid: held for rid, held in slots.items() if rid != run_id}
        return (RunSlots(slots=rest).model_dump(mode="json") if rest else DELETE), None

    await mutate(engine, RUNS.name, key, drop, attempts=attempts)
