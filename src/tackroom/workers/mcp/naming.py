"""Tool names as function-id segments: deterministic, collision-free, model-safe.

An MCP tool name may hold characters a function id segment or a model's tool name cannot
(``:``, ``/``, ``.``, spaces, non-ASCII). Each character outside ``[A-Za-z0-9_-]`` becomes
``_``, the result is cut to 64 characters (``tool`` when nothing is left), and names that end up
equal get ``_2``, ``_3``, ... in the order of their original names (sorted), so the same
listing always yields the same ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_SEGMENT", "safe_names"]

MAX_SEGMENT = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _base(name: str) -> str:
    return _UNSAFE.sub("_", name)[:MAX_SEGMENT] or "tool"


def safe_names(names: Iterable[str]) -> dict[str, str]:
    """``{original name: safe segment}`` for a server's tool names."""
    taken: set[str] = set()
    result: dict[str, str] = {}
    originals = sorted(set(names))
    # Names already safe keep themselves; only the renamed ones get suffixes.
    for name in originals:
        if _base(name) == name:
            result[name] = name
            taken.add(name)
    for name in originals:
        if name in result:
            continue
        base, n = _base(name), 1
        candidate = base
        while candidate in taken:
            n += 1
            suffix = f"_{n}"
            candidate = base[: MAX_SEGMENT - len(suffix)] + suffix
        result[name] = candidate
        taken.add(candidate)
    return result
