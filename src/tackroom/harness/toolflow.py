"""A tool's data-flow options (``untrusted_output``, ``side_effect``, ``sinks``), checked when
the tool is defined: a misspelt sink would otherwise never be watched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from tackroom.contracts.provenance import SIDE_EFFECTS
from tackroom.harness.errors import UsageError

__all__ = ["checked_sinks"]


def checked_sinks(
    name: str,
    *,
    side_effect: str | None,
    sinks: Sequence[str],
    arguments: type[BaseModel] | None,
    input_schema: Mapping[str, Any] | None,
) -> tuple[str, ...]:
    """``sinks`` as a tuple, or a ``UsageError`` when ``side_effect`` is not one, or a sink is
    not among the tool's arguments (``arguments``' fields, else ``input_schema``'s properties)."""
    if side_effect is not None and side_effect not in SIDE_EFFECTS:
        raise UsageError(f"tool {name}: side_effect must be one of {', '.join(SIDE_EFFECTS)}")
    if isinstance(sinks, str):
        raise UsageError(f"tool {name}: sinks is a list of argument names")
    if arguments is not None:
        names = set(arguments.model_fields)
    else:
        names = set((input_schema or {}).get("properties") or {})
    unknown = [sink for sink in sinks if sink not in names]
    if unknown:
        raise UsageError(f"tool {name}: sinks {unknown} are not among its arguments")
    return tuple(sinks)
