"""A run's inputs: the graph's declared defaults overlaid with what the caller gave."""

from __future__ import annotations

from typing import Any

from tackroom.contracts.tasks import GraphSpec
from tackroom.kit.taskgraph.load import GraphError

__all__ = ["InputsError", "merged_inputs"]


class InputsError(GraphError):
    """Inputs that do not fit the graph's ``inputs:``."""


def merged_inputs(graph: GraphSpec, given: dict[str, Any]) -> dict[str, Any]:
    """Declared defaults overlaid with ``given``; a required input (default ``null``) missing or
    an undeclared one given is an :class:`InputsError`."""
    unknown = sorted(set(given) - set(graph.inputs))
    if unknown:
        declared = ", ".join(sorted(graph.inputs)) or "none"
        raise InputsError(f"unknown input(s) {', '.join(unknown)} (declared: {declared})")
    merged = {**graph.inputs, **given}
    missing = sorted(name for name, value in merged.items() if value is None)
    if missing:
        raise InputsError(f"missing required input(s): {', '.join(missing)} (give --input k=v)")
    return merged
