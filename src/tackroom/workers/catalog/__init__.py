"""The ``catalog`` worker: model capabilities and prices (``models::*``).

Other workers use :mod:`tackroom.contracts.catalog` (function ids, payload models,
error codes) and reach the worker through ``engine.trigger``; the rest is private.
"""

from __future__ import annotations

__all__: list[str] = []
