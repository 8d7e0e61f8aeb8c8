"""The ``sessions`` worker: branching session trees and per-session inboxes.

Other workers use :mod:`tackroom.contracts.sessions` (function ids, payload models,
error codes) and reach the worker through ``engine.trigger``; the rest is private.
"""

from __future__ import annotations

__all__: list[str] = []
