"""Who a run acts for: the principal the gate checks permissions against and the audit records.

The gateway derives it from a verified credential (a per-user API key, an OIDC bearer token, or
the one-person shared token) and never from a request body; a local caller (the CLI, the
``Harness`` facade) names it itself, as the owner of the process. The orchestrator keeps it in the
turn record, hands it to the policy with every check, denies a tool whose
``required_permission`` is not among the roles, and names it in every ``gate_decision`` event.

``tenant`` is a hard boundary: the gateway keys every session a tenant creates by it
(:func:`tackroom.contracts.tenancy.qualify`), so another tenant's session is indistinguishable
from a missing one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_TENANT", "TENANT_PATTERN", "AuthMethod", "Principal"]

_NAME = r"^[^\s\x00-\x1f\x7f]+$"

DEFAULT_TENANT = "default"
"""The tenant of a local caller, of the shared token, and of every session created before
tenants existed: its sessions keep their plain ids."""

TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
"""Lower-case letters, digits, ``_`` and ``-``: never ``:``, the tenant separator of an id."""

AuthMethod = Literal["local", "token", "api_key", "oidc", "hook"]
"""How the principal was established: ``local`` (named by the process owner: CLI, facade,
config), ``token`` (the gateway's shared token), ``api_key``, ``oidc`` (a verified JWT), or
``hook`` (a user's authenticator)."""


class Principal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = 1
    id: str = Field(min_length=1, max_length=200, pattern=_NAME, description="a user or service id")
    roles: tuple[str, ...] = Field(
        default=(),
        max_length=64,
        description="the roles (permissions) the principal holds, e.g. ['deployer']",
    )
    tenant: str = Field(
        default=DEFAULT_TENANT, pattern=TENANT_PATTERN, description="the tenant it acts within"
    )
    method: AuthMethod = Field(default="local", description="how it was established")
    on_behalf_of: str | None = Field(
        default=None,
        max_length=200,
        description="the user who acted for this principal (an impersonation); none: itself",
    )

    def holds(self, permission: str) -> bool:
        return permission in self.roles

    @property
    def user(self) -> str:
        return self.id
