"""The agent lifecycle as seed 003 names it, a view of the orchestrator's turn states.

The orchestrator's durable turn has seven states (:data:`~tackroom.contracts.turn.TurnState`);
a person, a UI or a log reader thinks in six: the agent is idle, thinking (the model is asked),
acting (tools run), observing (their results are read back), finished, or in error. The mapping
is pure and total, so any worker, UI or test reads the same lifecycle from a turn state:

| turn state | lifecycle | why |
|---|---|---|
| ``provisioning`` | ``IDLE`` | the run has its input; nothing is asked of the model yet |
| ``assistant_streaming`` | ``THINKING`` | the model call is under way |
| ``function_execute`` | ``ACTING`` | the calls of the model's answer pass the gate and run |
| ``function_awaiting_approval`` | ``ACTING`` | a call waits for a person (or a child run) |
| ``steering_check`` | ``OBSERVING`` | the results are in; the guards and the inbox say what next |
| ``stopped`` | ``FINISHED`` | the run ended: the answer, a limit, a guard, an abort |
| ``stopped`` with an error | ``ERROR`` | a model call failed, the context overflowed, … |
| ``failed`` | ``ERROR`` | an unexpected error ended the run |

A session with no run in flight is ``IDLE`` as well. Log records and spans carry the lifecycle
of the step they were made in under :data:`LIFECYCLE_ATTRIBUTE` (``tackroom.kit.lifecycle``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, get_args

from tackroom.contracts.turn import TurnState

__all__ = [
    "LIFECYCLE_ATTRIBUTE",
    "LIFECYCLE_OF_STATE",
    "LIFECYCLE_STATES",
    "Lifecycle",
    "lifecycle_of",
]

Lifecycle = Literal["IDLE", "THINKING", "ACTING", "OBSERVING", "FINISHED", "ERROR"]
LIFECYCLE_STATES: tuple[Lifecycle, ...] = get_args(Lifecycle)

LIFECYCLE_ATTRIBUTE = "tackroom.lifecycle"
"""The span attribute (and, without the prefix, the log record field ``lifecycle``)."""

LIFECYCLE_OF_STATE: Mapping[TurnState, Lifecycle] = MappingProxyType(
    {
        "provisioning": "IDLE",
        "assistant_streaming": "THINKING",
        "function_execute": "ACTING",
        "function_awaiting_approval": "ACTING",
        "steering_check": "OBSERVING",
        "stopped": "FINISHED",
        "failed": "ERROR",
    }
)
"""Each turn state's lifecycle; a ``stopped`` run that carries an error is ``ERROR`` instead
(:func:`lifecycle_of`)."""


def lifecycle_of(state: TurnState | None, *, error: bool = False) -> Lifecycle:
    """The lifecycle of a turn in ``state`` (``None``: no run, ``IDLE``); ``error``: the run
    carries an error (a ``stopped`` run then reads ``ERROR``)."""
    if state is None:
        return "IDLE"
    if state == "stopped" and error:
        return "ERROR"
    return LIFECYCLE_OF_STATE[state]
