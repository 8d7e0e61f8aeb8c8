"""The ``redactor`` worker: an ``after_function_call`` hook that scrubs secrets from results.

The patterns live in :mod:`tackroom.contracts.redaction` and the scrubbing in
:mod:`tackroom.kit.redaction` (usable without the worker; span summaries use them too); the worker
in :mod:`tackroom.workers.redactor.worker`.
"""

from __future__ import annotations

__all__: list[str] = []
