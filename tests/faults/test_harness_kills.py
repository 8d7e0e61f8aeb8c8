"""SIGKILL of the harness at random instants of a multi-tool turn, on both backends.

Each trial starts a real harness process (``workload.py turn``) on a fresh engine: the model
calls two non-idempotent tools and one idempotent tool, then one more non-idempotent tool, then
answers; each tool writes a line to a file outside tackroom (the side effect counted) and
lingers a little after it. The harness is SIGKILLed at an instant drawn uniformly over an
uninterrupted run's length (measured on the same backend first), its client's events kept;
the engine is read (every entry it holds then must survive unchanged); a new harness process
resumes from the client's cursor — under ``TACKROOM_SOAK=1`` it may be killed again, up to three
times a trial — and a last one runs the turn to its end. Counted (:mod:`.checks`): turns
completed, duplicated side effects, entries lost or changed, event gaps, events reissued with
other content, calls answered as done that never ran, scripted-model surprises, tracebacks. All
but the completions must be 0.

Short mode: 3 trials per backend with seeded instants; ``TACKROOM_SOAK=1``: 30 per backend,
fresh randomness.
"""

from __future__ import annotations

import pytest

from tackroom.testing.backends import BACKENDS, engine_url_for

from .checks import Snapshot, check_session, side_effects, snapshot
from .procs import run_child
from .report import SOAK, Tally, judge, record, rng, trials
from .workload import RUN_ID, SESSION

TRIALS = trials(3, 30)
_BASELINE: dict[str, float] = {}

pytestmark = [
    pytest.mark.parametrize("backend", list(BACKENDS)),
    pytest.mark.timeout(3600 if SOAK else 240),
]


async def _baseline(backend: str, tmp_path_factory: pytest.TempPathFactory) -> float:
    """Seconds from boot to the committed end of an uninterrupted run (the span kills are drawn
    from), checked like any trial."""
    if backend not in _BASELINE:
        workdir = tmp_path_factory.mktemp(f"{backend}-baseline")
        url = engine_url_for(backend, workdir)
        child = await run_child(url, workdir, "turn", "--phase=first", name="baseline")
        assert child.booted_at is not None
        assert child.finished_at is not None
        _BASELINE[backend] = max(0.1, child.finished_at - child.booted_at)
        final = (await snapshot(url, [SESSION]))[SESSION]
        tally = check_session(SESSION, RUN_ID, final, side_effects(workdir), served=[child.events])
        judge(tally)
        assert tally.error_results == 0
    return _BASELINE[backend]


async def _trial(
    backend: str, index: int, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Tally, list[str | None]]:
    """One trial: its counts, and the committed turn state each kill left."""
    span = await _baseline(backend, tmp_path_factory)
    rand = rng(f"harness-kill:{backend}:{index}")
    workdir = tmp_path_factory.mktemp(f"{backend}-kill-{index}")
    url = engine_url_for(backend, workdir)
    kills_wanted = rand.randint(1, 3) if SOAK else 1
    served: list[list[dict[str, object]]] = []
    seen: list[Snapshot] = []
    tracebacks = kills = 0
    at_kill: list[str | None] = []
    cursor = 0
    ended = False
    for attempt in range(kills_wanted + 1):
        last = attempt == kills_wanted
        phase = "--phase=first" if attempt == 0 else "--phase=resume"
        child = await run_child(
            url,
            workdir,
            "turn",
            phase,
            f"--after={cursor}",
            name=f"child-{attempt}",
            # A resumed run has less left to do: its kill is drawn from the first half.
            kill_after=None if last else rand.uniform(0.0, span if attempt == 0 else span / 2),
        )
        tracebacks += child.tracebacks()
        served.append(child.events)
        cursor = max([cursor, *(e["seq"] for e in child.events)])
        if child.killed:
            kills += 1
            seen.append((await snapshot(url, [SESSION]))[SESSION])
            at_kill.append(None if seen[-1].record is None else seen[-1].record.state)
        if child.finished():
            [finished] = child.finished()
            violations = len(finished["provider"]["violations"])
            ended = True
            break
    assert ended, "the last harness did not report the end of the run"
    final = (await snapshot(url, [SESSION]))[SESSION]
    tally = check_session(SESSION, RUN_ID, final, side_effects(workdir), seen=seen, served=served)
    tally.trials, tally.kills = 1, kills
    tally.tracebacks += tracebacks
    tally.violations += violations
    return tally, at_kill


@pytest.mark.parametrize("index", range(TRIALS))
async def test_a_harness_killed_at_a_random_instant_finishes_the_turn_once(
    backend: str, index: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tally, at_kill = await _trial(backend, index, tmp_path_factory)
    record("harness_sigkill", backend, tally, states_at_kill=at_kill)
    judge(tally)
    assert tally.completed == 1
