"""The ``tackroom`` process starts without the cyclic garbage collector.

Starting ``tackroom run`` allocates ~90,000 objects that live as long as the process (modules,
pydantic's validators, the workers and their registrations) and little garbage (~2 %). Collecting
while they pile up examined them again and again for nothing: ~10 % of the time to the first
token. So :func:`hold` turns the collector off when ``main`` runs the process's own command line,
and the command calls :func:`started` once it is up: what exists then moves to the permanent
generation (``gc.freeze``: later collections skip it; the ~1,400 objects of start-up that were
garbage stay allocated) and collection resumes. ``main`` calls :func:`started` when the command
ends too, for commands that never say they are up.
"""

from __future__ import annotations

import gc

__all__ = ["hold", "started"]

_held = False


def hold() -> None:
    """Turn the collector off until :func:`started` (unless it is off already)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def started() -> None:
    """The command is up: freeze the objects of start-up out of collections and turn the
    collector back on. Does nothing unless :func:`hold` turned it off, so commands run in a
    test's process (``main(argv)``) leave its collector alone."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
