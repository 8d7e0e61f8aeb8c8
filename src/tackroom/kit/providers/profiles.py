"""Profile names and merging from raw config — plain functions, cheap to import.

The command line uses these to find which worker serves a provider name without importing a
worker (or its SDK); the workers' config models use :func:`merge_profiles` to lay a config
section over their shipped profiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["merge_profiles", "profile_names"]


def merge_profiles(
    defaults: Mapping[str, Mapping[str, Any]], overrides: Any
) -> dict[str, dict[str, Any]]:
    """The shipped ``defaults`` with ``overrides`` merged over them field by field.

    ``overrides`` maps a name to a mapping (merged over the default of that name, if any) or to
    ``None`` (the shipped profile is dropped). Anything else is returned as is for pydantic to
    reject with a good message.
    """
    merged: dict[str, dict[str, Any]] = {name: dict(raw) for name, raw in defaults.items()}
    if overrides is None:
        return merged
    if not isinstance(overrides, Mapping):
        return overrides  # type: ignore[no-any-return]
    for name, raw in overrides.items():
        if raw is None:
            merged.pop(name, None)
        elif isinstance(raw, Mapping):
            merged[name] = {**merged.get(name, {}), **raw}
        else:
            merged[name] = raw
    return merged


def profile_names(defaults: Mapping[str, Mapping[str, Any]], overrides: Any) -> set[str]:
    """Every provider name (profiles and aliases) a worker would serve, from raw config."""
    merged = merge_profiles(defaults, overrides)
    if not isinstance(merged, dict):
        return set(defaults)
    names: set[str] = set()
    for name, raw in merged.items():
        names.add(name)
        aliases = raw.get("aliases") if isinstance(raw, Mapping) else None
        if isinstance(aliases, list):
            names.update(a for a in aliases if isinstance(a, str))
    return names
