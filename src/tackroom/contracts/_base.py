"""The two bases of the contract modules' payload models.

Both are built at first use, not at import: a process imports a contract with every worker that
may call it, and validates few of its models.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Lenient", "Strict"]


class Strict(BaseModel):
    """A request or reply: a field the model does not declare is refused."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class Lenient(BaseModel):
    """A stored or returned record: unknown fields are ignored (a newer writer may add some)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)
