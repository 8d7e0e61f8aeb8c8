"""SIGKILL of the harness at 10 seeded random points of the scenario always resumes to the same
outputs, each step's side effect exactly once, and a step completed before the kill never
runs again (its call count is what it was at the kill) — on every backend.

The points are engine writes (any worker's: the run record's commits, the queue, approvals,
the test functions' effects), chosen from a calibration run's count with a fixed seed, killed
just before or just after the write alternately. ``TACKROOM_TASKS_CRASH_POINTS`` raises the
count for a soak (once the run has ended, the remaining points are not used).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts import tasks as c
from tackroom.testing import running_engine
from tackroom.testing.backends import BACKENDS, engine_url_for

from .scenario import CALLS, EXPECTED_EFFECTS, EXPECTED_OUTPUTS, RUN_ID, effects

ROOT = Path(__file__).resolve().parents[3]
POINTS = int(os.environ.get("TACKROOM_TASKS_CRASH_POINTS", "10"))
SEED = 14
TIMEOUT = 240
CHILD_TIMEOUT = 60.0


async def _child(
    url: str, workdir: Path, *, kill_at: int = 0, mode: str = "before", only: str = ""
) -> list[Any]:
    """Run ``crash_child``; its JSON lines, and its exit code last."""
    stderr_path = workdir / f"child-{kill_at}-{mode}.stderr"
    with stderr_path.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.workers.tasks.crash_child",
            url,
            f"--kill-at={kill_at}",
            f"--mode={mode}",
            f"--only={only}",
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
        )
    try:
        async with asyncio.timeout(CHILD_TIMEOUT):
            out, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    lines: list[Any] = []
    for line in out.splitlines():
        with contextlib.suppress(ValueError):  # a line cut by SIGKILL
            lines.append(json.loads(line))
    lines.append(process.returncode)
    expected = {0} if kill_at == 0 else {0, -signal.SIGKILL}
    assert process.returncode in expected, stderr_path.read_text()[-3000:]
    return lines


async def _state(url: str) -> tuple[c.TaskRun | None, dict[str, int]]:
    async with running_engine(url) as engine:
        run = await c.RUNS_SCOPE.get(engine, RUN_ID)
        calls = {e.key: int(e.value["n"]) for e in await engine.list_state(CALLS)}
        return run, calls


def _done_keys(run: c.TaskRun | None) -> list[str]:
    if run is None:
        return []
    return [
        f"{RUN_ID}/{iid}/{instance.epoch}"
        for iid, instance in run.instances.items()
        if instance.status == "succeeded"
    ]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_sigkill_at_random_points_resumes_to_the_same_outputs(
    backend: str, tmp_path: Path
) -> None:
    url = engine_url_for(backend, tmp_path)
    rng = random.Random(SEED)
    snapshots: list[tuple[str, list[str], dict[str, int]]] = []
    for n in range(POINTS):
        gap, mode = rng.randint(1, 6), rng.choice(["before", "after"])
        first = await _child(url, tmp_path, kill_at=gap, mode=mode)
        if first[-1] == 0:
            break  # it finished before its kill point
        at_kill, calls_at_kill = await _state(url)
        where = f"kill {n + 1}: {mode} write {gap} of its process"
        snapshots.append((where, _done_keys(at_kill), calls_at_kill))
    await _child(url, tmp_path)
    run, calls = await _state(url)
    assert run is not None
    assert run.status == "succeeded", run.error
    assert run.outputs == EXPECTED_OUTPUTS
    async with running_engine(url) as engine:
        assert await effects(engine) == EXPECTED_EFFECTS
    for where, done, calls_at_kill in snapshots:
        for key in done:
            if key in calls_at_kill:
                assert calls[key] == calls_at_kill[key], (
                    f"{where}: {key} ran again after it was done"
                )
    least = min(POINTS, 10)  # a soak's later points may fall after the run's end
    assert len(snapshots) >= least, f"the run ended after {len(snapshots)} kills, not {least}"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("commit", [3, 9])
async def test_a_step_committed_just_before_the_kill_is_not_run_again(
    commit: int, tmp_path: Path
) -> None:
    """Killed right after a step's commit, before its delivery is acknowledged: the message
    comes again after the restart and must find the step done (its call count stays)."""
    url = engine_url_for("embedded", tmp_path)
    first = await _child(url, tmp_path, kill_at=commit, mode="after", only="set_state task-runs/")
    assert first[-1] == -signal.SIGKILL
    at_kill, calls_at_kill = await _state(url)
    done = [key for key in _done_keys(at_kill) if key in calls_at_kill]
    assert done, "no step with a side effect had finished at the kill"
    await _child(url, tmp_path)
    run, calls = await _state(url)
    assert run is not None
    assert (run.status, run.outputs) == ("succeeded", EXPECTED_OUTPUTS)
    assert {key: calls[key] for key in done} == {key: calls_at_kill[key] for key in done}
