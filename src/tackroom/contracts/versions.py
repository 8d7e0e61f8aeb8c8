"""Reading records written before a format changed: the ``schema_version`` upgrade rule.

Every persisted or wire model carries ``schema_version``. Writers always write the current
version; readers accept the versions before it. A model whose format changed upgrades old data in
a ``model_validator(mode="before")``: when the data is a mapping whose ``schema_version`` is below
the current one (or absent, which means 1 — the first version never needed to say), the validator
renames the old keys and stamps the current version, so the model in memory — and anything written
back from it — is in the current format. Data at the current version is left alone.

Version 2 renamed two misleading names:

- a ``function_call`` content block's ``function_id`` → ``tool_name`` (it always held the name
  the model sees, ``fs__read``, not a function id) — messages, version 2;
- ``message_id`` → ``run_id`` where it meant the run's id — ``RunStartRequest`` and
  ``CallContext``, version 2; the orchestrator's turn record, which had both, drops it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["rename", "renamed_before", "upgrading"]


def upgrading(data: Any, version: int) -> dict[str, Any] | None:
    """A copy of ``data`` stamped ``version`` if it is a mapping written before ``version``, to
    be upgraded in place by the caller; ``None`` (nothing to do) otherwise."""
    if not isinstance(data, dict):
        return None
    written = data.get("schema_version", 1)
    if not isinstance(written, int) or isinstance(written, bool) or written >= version:
        return None
    return {**data, "schema_version": version}


def rename(data: dict[str, Any], old: str, new: str) -> None:
    """Move ``data[old]`` to ``data[new]`` (a value already under ``new`` wins: ``old`` is then
    dropped)."""
    if old in data:
        value = data.pop(old)
        data.setdefault(new, value)


def renamed_before(data: Any, version: int, old: str, new: str) -> Any:
    """``data`` as ``version`` writes it when the only change before ``version`` was renaming
    ``old`` to ``new`` (what a model's ``mode="before"`` validator returns)."""
    upgraded = upgrading(data, version)
    if upgraded is None:
        return data
    rename(upgraded, old, new)
    return upgraded
