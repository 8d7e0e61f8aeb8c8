"""The kill switch: abort every run of a tenant (or of one of its principals) and refuse new ones
until an admin lifts it.

A hold is durable engine state (scope ``run-holds``, one key per tenant), so every process that
starts runs, on any host, sees it: ``run::start`` refuses a held principal with
:data:`RUNS_HELD_ERROR`. ``runs::hold`` stores the hold *then* aborts the matching runs in flight
(``run::abort``), so a run cannot start between the two. Turning it on and off is an audit fact
(``runs_held`` / ``runs_released``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function, Scope
from tackroom.contracts.principal import TENANT_PATTERN, Principal

__all__ = [
    "HOLD",
    "HOLDS",
    "HOLDS_SCOPE",
    "RELEASE",
    "RUNS_HELD_ERROR",
    "AbortedRun",
    "HeldPrincipal",
    "Hold",
    "HoldRequest",
    "HoldResponse",
    "HoldsRequest",
    "ReleaseRequest",
    "ReleaseResponse",
    "TenantHolds",
    "held_message",
]

RUNS_HELD_ERROR = "runs_held"
"""The error code of a ``run::start`` refused because a kill switch holds its principal."""

HeldPrincipal = Annotated[
    str, Field(min_length=1, max_length=200, pattern=r"^[^\s\x00-\x1f\x7f]+$")
]
"""A principal whose runs a switch holds: its id, as the gateway and the CLI take it."""


class Hold(_Model):
    """One switch that is on."""

    reason: str = Field(min_length=1, max_length=500)
    held_by: str = Field(description="who turned it on (the verified caller's id)")
    at: float = Field(description="when (epoch seconds)")


class TenantHolds(_Model):
    """The switches of one tenant: its whole tenant, and single principals."""

    schema_version: Literal[1] = 1
    tenant: str = Field(pattern=TENANT_PATTERN)
    everyone: Hold | None = Field(default=None, description="every run of the tenant is held")
    principals: dict[str, Hold] = Field(
        default_factory=dict, description="the runs of these principals (by id) are held"
    )

    def holding(self, principal_id: str | None) -> Hold | None:
        """The switch that holds a run acting for ``principal_id``, if any."""
        if self.everyone is not None:
            return self.everyone
        return None if principal_id is None else self.principals.get(principal_id)

    @property
    def empty(self) -> bool:
        return self.everyone is None and not self.principals


def held_message(tenant: str, principal_id: str | None, hold: Hold) -> str:
    """The one line a refused start says: what holds it and how to lift it."""
    whose = f"tenant {tenant!r}" if principal_id is None else f"{principal_id!r} in {tenant!r}"
    lift = f"tackroom runs resume --tenant {tenant}"
    if principal_id is not None:
        lift += f" --principal {principal_id}"
    return (
        f"runs of {whose} are stopped by a kill switch ({hold.reason}; by {hold.held_by}):"
        f" an admin of the tenant lifts it with `{lift}`"
    )


class HoldRequest(_Model):
    schema_version: Literal[1] = 1
    tenant: str = Field(pattern=TENANT_PATTERN)
    principal: HeldPrincipal | None = Field(
        default=None,
        description="only this principal's runs (default: every run of the tenant)",
    )
    reason: str = Field(min_length=1, max_length=500)
    actor: Principal = Field(description="who turns the switch on, as its caller verified it")


class AbortedRun(_Model):
    session_id: str
    run_id: str
    principal: str | None = None
    state: str = Field(description="the state it was in when it was aborted")


class HoldResponse(_Model):
    schema_version: Literal[1] = 1
    tenant: str
    principal: str | None = None
    already_held: bool = Field(description="the switch was on already (it is kept as it was)")
    aborted: list[AbortedRun] = Field(description="the runs in flight that were aborted")


class ReleaseRequest(_Model):
    schema_version: Literal[1] = 1
    tenant: str = Field(pattern=TENANT_PATTERN)
    principal: HeldPrincipal | None = None
    actor: Principal


class ReleaseResponse(_Model):
    schema_version: Literal[1] = 1
    tenant: str
    principal: str | None = None
    released: bool = Field(description="false: that switch was not on")


class HoldsRequest(_Model):
    schema_version: Literal[1] = 1
    tenant: str = Field(pattern=TENANT_PATTERN)


HOLDS_SCOPE: Scope[TenantHolds] = Scope("run-holds", TenantHolds)
"""Key = tenant: the tenant's switches (absent: none is on)."""

HOLD: Function[HoldRequest, HoldResponse] = Function(
    "runs::hold",
    HoldRequest,
    HoldResponse,
    description="Kill switch: abort every run of a tenant (or principal) and refuse new ones.",
)
RELEASE: Function[ReleaseRequest, ReleaseResponse] = Function(
    "runs::release",
    ReleaseRequest,
    ReleaseResponse,
    description="Lift a kill switch: the tenant's (or principal's) runs may start again.",
)
HOLDS: Function[HoldsRequest, TenantHolds] = Function(
    "runs::holds",
    HoldsRequest,
    TenantHolds,
    description="The kill switches that are on for a tenant.",
)
