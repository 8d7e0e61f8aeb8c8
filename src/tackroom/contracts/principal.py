"""Who a run acts for: the principal the gate checks permissions against and the audit records.

A run request may carry one (``RunStartRequest.principal``); the orchestrator keeps it in the turn
record, hands its id and roles to the policy with every check, denies a tool whose
``required_permission`` is not among the roles, and names the principal in every
``gate_decision`` event.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Principal"]

_NAME = r"^[^\s\x00-\x1f\x7f]+$"


class Principal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = 1
    id: str = Field(min_length=1, max_length=200, pattern=_NAME, description="a user or service id")
    roles: tuple[str, ...] = Field(
        default=(),
        max_length=64,
        description="the roles (permissions) the principal holds, e.g. ['deployer']",
    )

    def holds(self, permission: str) -> bool:
        return permission in self.roles
