"""The redactor's patterns and scrubbing, where they were first written: the patterns are
:mod:`tackroom.contracts.redaction`, the scrubbing :mod:`tackroom.kit.redaction` (shared with span
summaries); both are re-exported here.
"""

from __future__ import annotations

from tackroom.contracts.redaction import (
    DEFAULT_PATTERNS,
    DEFAULT_REPLACEMENT,
    START,
    RedactPattern,
    check_replacement,
)
from tackroom.kit.redaction import MAX_DEPTH, Redactor, TooDeep

__all__ = [
    "DEFAULT_PATTERNS",
    "DEFAULT_REPLACEMENT",
    "MAX_DEPTH",
    "START",
    "RedactPattern",
    "Redactor",
    "TooDeep",
    "check_replacement",
]
