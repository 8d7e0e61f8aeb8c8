"""The lifecycle of the step being worked, for every log record and span made while it runs.

The orchestrator's driver enters :func:`in_step` around the work of each step it takes; the
step's session, run, turn state and lifecycle (:mod:`tackroom.contracts.lifecycle`) are then in
a context variable for everything that step runs in this process — the model call, the tools
served here, the hooks, the gate. Nobody writes them at a log call:

- :class:`LifecycleFilter`, a :class:`logging.Filter` that :func:`install_lifecycle_logging`
  puts once on each handler of the root logger (the orchestrator does at start), gives every
  record ``lifecycle`` and ``turn_state`` (``"-"`` outside a step) and, inside a step,
  ``session_id`` and ``run_id`` unless the record has its own (``extra=``). A format string may
  use them: ``"%(levelname)s [%(lifecycle)s] %(name)s: %(message)s"``. A handler added later
  takes the filter with ``handler.addFilter(LifecycleFilter())``.
- :func:`span_attributes` is ``{"tackroom.lifecycle": …}`` inside a step (empty outside): the
  orchestrator's step spans and the GenAI model and tool spans carry it.

A context variable follows the step into the tasks it starts and the handlers this process
runs for it; a worker in another process is not inside the step and says ``"-"``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from tackroom.contracts.lifecycle import LIFECYCLE_ATTRIBUTE, Lifecycle, lifecycle_of
from tackroom.contracts.turn import TurnState

__all__ = [
    "OUTSIDE",
    "LifecycleFilter",
    "StepContext",
    "current_step",
    "in_step",
    "install_lifecycle_logging",
    "span_attributes",
]

OUTSIDE = "-"
"""``lifecycle`` and ``turn_state`` of a record made outside any step."""


@dataclass(frozen=True, slots=True)
class StepContext:
    session_id: str
    run_id: str
    state: TurnState
    lifecycle: Lifecycle


_CURRENT: ContextVar[StepContext | None] = ContextVar("tackroom_step", default=None)


def current_step() -> StepContext | None:
    """The step being worked in this context, if any."""
    return _CURRENT.get()


@contextmanager
def in_step(
    *, session_id: str, run_id: str, state: TurnState, error: bool = False
) -> Iterator[StepContext]:
    """The body is the work of one step of ``run_id`` in ``state`` (``error``: the run carries an
    error already, so a ``stopped`` state reads ``ERROR``)."""
    step = StepContext(session_id, run_id, state, lifecycle_of(state, error=error))
    token = _CURRENT.set(step)
    try:
        yield step
    finally:
        _CURRENT.reset(token)


def span_attributes() -> dict[str, str]:
    """The lifecycle attribute of a span opened now (none outside a step)."""
    step = _CURRENT.get()
    return {} if step is None else {LIFECYCLE_ATTRIBUTE: step.lifecycle}


class LifecycleFilter(logging.Filter):
    """Stamps each record with the step it was made in; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        step = _CURRENT.get()
        if step is None:
            if not hasattr(record, "lifecycle"):
                record.lifecycle = OUTSIDE
                record.turn_state = OUTSIDE
            return True
        fields = record.__dict__
        fields.setdefault("lifecycle", step.lifecycle)
        fields.setdefault("turn_state", step.state)
        fields.setdefault("session_id", step.session_id)
        fields.setdefault("run_id", step.run_id)
        return True


_FILTER = LifecycleFilter()


def install_lifecycle_logging() -> LifecycleFilter:
    """Put the one :class:`LifecycleFilter` on every handler of the root logger (a handler that
    has it keeps one: installing again changes nothing). Returns it."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(_FILTER)
    return _FILTER
