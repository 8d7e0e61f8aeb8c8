"""The ``redactor`` worker: an ``after_function_call`` hook that scrubs secrets from results.

The patterns and the scrubbing live in :mod:`tackroom.workers.redactor.patterns` (usable without
the worker); the worker in :mod:`tackroom.workers.redactor.worker`.
"""

from __future__ import annotations

__all__: list[str] = []
