"""The turn every system runs, how a system is driven, and how one run of it is timed.

A turn: the user asks ``USER_TEXT``; model call 1 streams one tool call, ``add(a=2, b=3)``; the
system runs the tool (a Python function); model call 2 streams ``ANSWER`` as ``len(DELTAS)`` (50)
text deltas and ends. The scripted models take no time: what is measured is the system.

A system module exposes ``describe() -> dict`` (versions, persistence) and ``open_system(dir)``,
an async context manager yielding a :data:`Turn`: ``await turn(session_id)`` runs one turn in that
session (a new session on first use), consuming the deltas as a streaming client would, and returns
an :class:`Outcome` that :func:`check` verifies outside the clocks.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "ANSWER",
    "DELTAS",
    "TOOL_ARGUMENTS",
    "TOOL_ARGUMENTS_JSON",
    "TOOL_NAME",
    "TOOL_RESULT",
    "USER_TEXT",
    "BenchError",
    "Outcome",
    "SystemModule",
    "Turn",
    "add",
    "measure",
]

USER_TEXT = "What is 2 + 3? Use the calculator."
ANSWER = (
    "I used the calculator: 2 + 3 = 5. Adding two and three gives five, because counting three "
    "more from two passes three and four and lands on five. So the answer to your question is 5, "
    "exactly, with no rounding involved. Let me know if you need anything else."
)
DELTAS: tuple[str, ...] = tuple(re.findall(r"\S+\s*", ANSWER))
"""The answer as the model streams it: 50 word-sized deltas (the same text as bench/turn.py)."""
TOOL_NAME = "add"
TOOL_ARGUMENTS = {"a": 2, "b": 3}
TOOL_ARGUMENTS_JSON = '{"a": 2, "b": 3}'
TOOL_RESULT = "5"
TURN_TIMEOUT = 60.0

assert len(DELTAS) == 50
assert "".join(DELTAS) == ANSWER


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class BenchError(RuntimeError):
    """A system did not run the turn as scripted: its figures would mean nothing."""


@dataclass(slots=True)
class Outcome:
    """What a streaming client of the system saw in one turn."""

    deltas: list[str] = field(default_factory=list)
    """The answer's text deltas, as the client received them."""
    answer: str = ""
    """The final answer the system reported."""
    tool_result: str = ""
    """The tool's result as the system stored it (text)."""
    stored_messages: int | None = None
    """Messages (or items, or checkpoints) persisted for the session, where cheap to read."""


Turn = Callable[[str], Awaitable[Outcome]]


class SystemModule(Protocol):
    """What ``bench/peers.py`` needs of a module in this package."""

    def describe(self) -> dict[str, Any]: ...

    def open_system(self, directory: Path) -> AbstractAsyncContextManager[Turn]: ...


def check(outcome: Outcome, where: str) -> None:
    streamed = "".join(outcome.deltas)
    if streamed != ANSWER or outcome.answer.strip() != ANSWER.strip():
        raise BenchError(
            f"{where}: answer not as scripted: streamed {streamed!r:.60}, final"
            f" {outcome.answer!r:.60}"
        )
    if outcome.tool_result.strip().strip('"') != TOOL_RESULT:
        raise BenchError(f"{where}: tool result {outcome.tool_result!r}, expected {TOOL_RESULT}")


Timed = tuple[float, float]
"""Seconds of wall clock and of this process's CPU time (all its threads)."""


async def timed(turn: Turn, session_id: str) -> tuple[Timed, Outcome]:
    async with asyncio.timeout(TURN_TIMEOUT):
        cpu = time.process_time()
        start = time.perf_counter()
        outcome = await turn(session_id)
        elapsed = time.perf_counter() - start, time.process_time() - cpu
    check(outcome, session_id)
    return elapsed, outcome


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50 and p90 (nearest rank) in milliseconds."""
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1e3, 3),
        "p90_ms": round(p90 * 1e3, 3),
    }


def figures(samples: list[Timed]) -> dict[str, Any]:
    return {
        "wall": percentiles([wall for wall, _ in samples]),
        "cpu": percentiles([cpu for _, cpu in samples]),
        "samples": len(samples),
    }


async def measure(
    module: SystemModule,
    directory: Path,
    *,
    turns: int,
    warmup: int,
    same_session_turns: int,
) -> dict[str, Any]:
    """Open the system, run ``warmup`` turns, ``turns`` fresh-session turns and (if asked) one
    session of ``same_session_turns`` turns; figures per turn."""
    start = time.perf_counter()
    async with module.open_system(directory) as turn:
        opened = time.perf_counter() - start
        for i in range(warmup):
            await timed(turn, f"warm-{i}")
        fresh = [(await timed(turn, f"fresh-{i}"))[0] for i in range(turns)]
        same: list[Timed] = []
        last: Outcome | None = None
        for _ in range(same_session_turns):
            elapsed, last = await timed(turn, "same")
            same.append(elapsed)
    result: dict[str, Any] = {
        "open_ms": round(opened * 1e3, 1),
        "warmup_turns": warmup,
        "fresh_session": figures(fresh),
    }
    if same:
        result["same_session"] = {
            **figures(same),
            "first_turn_ms": round(same[0][0] * 1e3, 3),
            "last_turn_ms": round(same[-1][0] * 1e3, 3),
            "stored_after_last_turn": last.stored_messages if last else None,
        }
    return result
