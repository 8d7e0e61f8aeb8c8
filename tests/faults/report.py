"""The fault suite's figures: each trial adds its counts to a JSON-lines file (``bench/faults.py``).

``TACKROOM_FAULTS_FIGURES=PATH`` names the file (``bench/faults.py`` sets it); without it the
figures are only asserted, not written. ``TACKROOM_SOAK=1`` selects the long mode: many more
trials, fresh randomness (:func:`trials`, :func:`rng`).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import pytest

__all__ = ["FIGURES_ENV", "KNOWN_BUGS", "SOAK", "Tally", "judge", "record", "rng", "trials"]

FIGURES_ENV = "TACKROOM_FAULTS_FIGURES"
SOAK = os.environ.get("TACKROOM_SOAK") == "1"
SEED = 16  # the number: the short mode is the same every run


def trials(short: int, long: int) -> int:
    """How many trials a scenario runs: ``short`` in CI, ``long`` under ``TACKROOM_SOAK=1``."""
    return long if SOAK else short


def rng(name: str) -> random.Random:
    """The scenario's random source: seeded in the short mode, fresh in the long one."""
    return random.Random() if SOAK else random.Random(f"{SEED}:{name}")


@dataclass
class Tally:
    """What a trial (or a run of the suite) counted. Every field but ``trials``, ``turns``,
    ``completed``, ``kills`` and ``error_results`` must be 0."""

    trials: int = 0
    kills: int = 0
    """Processes SIGKILLed (harnesses or NATS servers) and outages."""
    turns: int = 0
    completed: int = 0
    """Runs that ended ``stopped``/``end`` with every entry as an uninterrupted run leaves it."""
    unfinished: int = 0
    """Runs that did not end ``stopped``/``end`` (but those of ``ended_by_outage``)."""
    ended_by_outage: int = 0
    """Runs that ended ``stopped``/``error`` because the NATS connection dropped in a model call."""
    dead_lettered: int = 0
    """Runs stranded mid-turn: their step was dead-lettered after the engine failed it."""
    duplicated_effects: int = 0
    """Extra side effects of non-idempotent calls (a call that ran twice counts 1)."""
    skipped_calls: int = 0
    """Calls with no result, a successful result but no side effect, or answered "unknown tool"
    (the run was provisioned without the tools it names)."""
    lost_or_changed_entries: int = 0
    """Expected entries missing, entries not expected, entries that changed after being seen."""
    event_gaps: int = 0
    """Sequences missing from a session's ``agent::events`` or from what a client was served."""
    reissued_events: int = 0
    """An ``event_id`` stored or served again with other content."""
    events_after_end: int = 0
    """Events stored after the run's ``agent_end``."""
    tracebacks: int = 0
    """Tracebacks printed by a child process."""
    violations: int = 0
    """Requests the scripted model did not expect (a wrong transcript after a resume)."""
    error_results: int = 0
    """Calls answered to the model with an error (``outcome unknown`` after a kill): allowed."""
    error_texts: list[str] = field(default_factory=list)
    """What those error results said (``<function>: <text>``)."""
    details: list[str] = field(default_factory=list)
    """What each must-be-0 count saw (the session, the entry or event), for the report."""

    MUST_BE_ZERO = (
        "unfinished",
        "ended_by_outage",
        "dead_lettered",
        "duplicated_effects",
        "skipped_calls",
        "lost_or_changed_entries",
        "event_gaps",
        "reissued_events",
        "events_after_end",
        "tracebacks",
        "violations",
    )

    def __iadd__(self, other: Tally) -> Tally:
        for each in fields(self):
            setattr(self, each.name, getattr(self, each.name) + getattr(other, each.name))
        return self

    def faults(self) -> dict[str, int]:
        """The counts that must be 0, those that are not."""
        return {name: getattr(self, name) for name in self.MUST_BE_ZERO if getattr(self, name)}


KNOWN_BUGS: dict[str, str] = {}
"""Faults a trial may find that are known bugs with a deterministic reproduction of their own."""


def judge(tally: Tally) -> None:
    """Fail the trial on any must-be-0 count; a trial whose only faults are :data:`KNOWN_BUGS`
    is an expected failure (its counts are in the figures all the same)."""
    faults = tally.faults()
    if faults and set(faults) <= set(KNOWN_BUGS):
        pytest.xfail("; ".join(KNOWN_BUGS[name] for name in faults) + f": {tally.details}")
    assert faults == {}, tally


def record(scenario: str, backend: str, tally: Tally, **extra: object) -> None:
    """Add one trial's counts to the figures file, if one is named."""
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    line = {"scenario": scenario, "backend": backend, **asdict(tally), **extra}
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
