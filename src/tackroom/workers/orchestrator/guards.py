"""The loop guards of the turn, pure (:mod:`tackroom.contracts.guards` says what they are).

:func:`follow_streak` runs when a model answer is planned, in the transition: it extends or ends
the record's :class:`~.record.ToolStreak` with the answer's calls and, when the streak is longer
than the tool's limit, settles those calls at once — the first time with a result that steers
the model (it is looping, and what to do instead), the next time with one that says the run
stops, which :func:`tool_loop_stop` then reports at the steering check. :func:`repeated_calls`
is the identical-call guard. No I/O: a crash redoes nothing, the record holds the streak.
"""

from __future__ import annotations

from dataclasses import dataclass

from tackroom.contracts.guards import LoopGuard
from tackroom.workers.orchestrator.planning import error_result
from tackroom.workers.orchestrator.record import CallState, ToolStreak, TurnRecord

__all__ = ["DEFAULT_GUARD", "Stop", "follow_streak", "repeated_calls", "tool_loop_stop"]

DEFAULT_GUARD = LoopGuard()


@dataclass(frozen=True, slots=True)
class Stop:
    """Why the run stops: its ``stop_reason`` and the note the transcript gets."""

    stop_reason: str
    text: str


def follow_streak(r: TurnRecord) -> None:
    """The streak after the answer whose calls are ``r.calls`` (planned, not yet run); the calls
    the guard refuses are settled with the result the model reads. ``r`` is the transition's
    copy: the streak is replaced, never changed in place."""
    guard = r.loop_guard or DEFAULT_GUARD
    function_ids = {call.function_id for call in r.calls}
    if len(function_ids) != 1 or None in function_ids:
        r.tool_streak = None  # no call, several tools, or one the model cannot call
        return
    [function_id] = function_ids
    assert function_id is not None
    streak = r.tool_streak
    if streak is None or streak.function_id != function_id:
        streak = ToolStreak(function_id=function_id)
    else:
        streak = streak.model_copy(update={"turns": streak.turns + 1})
    r.tool_streak = streak
    limit = guard.limit_for(function_id)
    if limit is None or streak.turns <= limit:
        return
    name = r.calls[0].tool_name
    if streak.steered:
        streak.stopped = True
        text = (
            f"Not run: you called {name} again after you were told you were looping; the run"
            " stops here."
        )
    else:
        streak.steered = True
        text = (
            f"[LOOP] Not run: this is your call of {name} {streak.turns} times in a row (the limit"
            f" is {limit}), and changing its arguments has not got you further. Stop calling"
            f" {name}: answer with what you have, try another approach or another tool, or tell"
            " the user what is in the way. Calling it again stops the run."
        )
    details = {
        "error": "tool_loop",
        "function_id": function_id,
        "in_a_row": streak.turns,
        "limit": limit,
        "stopping": streak.stopped,
    }
    for call in r.calls:
        _refuse(call, text, details)


def _refuse(call: CallState, text: str, details: dict[str, object]) -> None:
    if call.result is None:  # one the plan settled already (invalid arguments) keeps its reason
        call.status = "done"
        call.result = error_result(call, text, details=dict(details))


def tool_loop_stop(r: TurnRecord) -> Stop | None:
    """The run stops: the model called the tool again after it was steered."""
    streak = r.tool_streak
    if streak is None or not streak.stopped:
        return None
    limit = (r.loop_guard or DEFAULT_GUARD).limit_for(streak.function_id)
    return Stop(
        "tool_loop",
        f"Stopped: the model called {streak.function_id} {streak.turns} times in a row (the limit"
        f" is {limit}) and went on after it was told it was looping.",
    )


def repeated_calls(r: TurnRecord) -> Stop | None:
    """The run stops: the same call (function and arguments) more than the limit."""
    repeated = max(r.call_counts.values(), default=0)
    if repeated <= (r.loop_guard or DEFAULT_GUARD).identical_call_limit:
        return None
    return Stop(
        "loop_detected",
        f"Stopped: the model made the same call with the same arguments {repeated} times.",
    )
