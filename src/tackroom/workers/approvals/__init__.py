"""The ``approvals`` worker: human approval of function calls (``approval::*``).

Other workers use :mod:`tackroom.contracts.approvals` (function ids, state layout,
payload models, error codes) and reach the worker through ``engine.trigger``; the rest is private.
"""

from __future__ import annotations

__all__: list[str] = []
