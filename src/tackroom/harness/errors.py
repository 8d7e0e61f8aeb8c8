"""The facade's typed errors: each says what is wrong and what to do, in one line."""

from __future__ import annotations

from tackroom.runtime.errors import HarnessError

__all__ = ["UsageError"]


class UsageError(HarnessError, ValueError):
    """The harness was asked for something it cannot do as configured (a usage problem)."""
