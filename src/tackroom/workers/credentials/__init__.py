"""The ``credentials`` worker: provider API tokens (``auth::*``).

Other workers use :mod:`tackroom.contracts.credentials` (function ids, payload models,
error codes) and reach the worker through ``engine.trigger``; the rest is private.
"""

from __future__ import annotations

__all__: list[str] = []
