"""Structured output: how a run asks the model for one JSON value valid against a schema.

The facade (``Harness(output_type=...)``) and the gateway (``POST /v1/runs`` with
``output_schema``) append the same paragraph to a run's instructions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["answer_format"]


def answer_format(schema: Mapping[str, Any], *, name: str) -> str:
    """The instruction to answer with a single JSON value valid against ``schema``."""
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return (
        f"When you give your final answer, reply with a single JSON value that validates"
        f" against this JSON schema ({name}), and nothing else — no prose, no"
        f" explanation:\n{text}"
    )
