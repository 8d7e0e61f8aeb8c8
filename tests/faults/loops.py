"""A harness process running many sessions while a fault is injected around it, then counted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from .checks import check_session, side_effects, snapshot
from .procs import Child, run_child
from .report import Tally

__all__ = ["Fault", "loop_trial"]

Fault = Callable[[Child], Awaitable[int]]
"""Injects faults while the child runs; returns how many (kills, outages)."""


async def loop_trial(
    url: str,
    workdir: Path,
    fault: Fault,
    *,
    sessions: int,
    concurrency: int,
    think: float = 0.05,
    check_url: str | None = None,
    timeout: float = 60.0,
) -> Tally:
    """Run ``workload.py loop`` on ``url`` (``sessions`` runs, ``concurrency`` at a time) with
    ``fault`` injected once it booted; count every session (:func:`check_session`), reading
    the engine at ``check_url`` (default ``url``). A run not ended ``timeout`` seconds after its
    start is given up on (and counted)."""
    injected = [0]

    async def during(child: Child) -> None:
        injected[0] = await fault(child)

    child = await run_child(
        url,
        workdir,
        "loop",
        f"--sessions={sessions}",
        f"--concurrency={concurrency}",
        f"--think={think}",
        f"--timeout={timeout}",
        name="loop",
        during=during,
        timeout=timeout * (sessions // concurrency + 1) + 30,
    )
    names = [f"s{i}" for i in range(sessions)]
    finished = {m["session"] for m in child.finished()}
    assert finished == set(names), f"runs the loop did not see end: {set(names) - finished}"
    final = await snapshot(check_url or url, names)
    lines = side_effects(workdir)
    tally = Tally(trials=1, kills=injected[0], tracebacks=child.tracebacks())
    for name in names:
        tally += check_session(name, f"run-{name}", final[name], lines)
    return tally
