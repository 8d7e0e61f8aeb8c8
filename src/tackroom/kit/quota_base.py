"""The pieces of :mod:`tackroom.kit.quota`: limits and settings, the typed refusals, the
subjects a principal is counted as (its user, its tenant), and the compare-and-set loop every
write of the counts goes through."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tackroom.contracts.principal import TENANT_PATTERN, Principal
from tackroom.contracts.quota import (
    QUOTA_EXCEEDED_ERROR,
    QuotaKind,
    QuotaRefusal,
    QuotaSubject,
    subject_key,
)
from tackroom.engine.errors import FunctionError
from tackroom.kit.cas import Contention

__all__ = [
    "QuotaContention",
    "QuotaDefaults",
    "QuotaExceeded",
    "QuotaLimits",
    "QuotaSettings",
    "Subject",
    "subjects",
]

T = TypeVar("T")


class QuotaLimits(BaseModel):
    """Per-minute rates and a concurrency cap; ``None``: no limit."""

    model_config = ConfigDict(extra="forbid")

    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    max_concurrent_runs: int | None = Field(default=None, ge=1)

    def over(self, base: QuotaLimits) -> QuotaLimits:
        """The limits this entry names (``null`` included: no limit), the rest ``base``'s."""
        return base.model_copy(update={name: getattr(self, name) for name in self.model_fields_set})


class QuotaDefaults(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant: QuotaLimits = Field(default_factory=QuotaLimits, description="each tenant's")
    user: QuotaLimits = Field(default_factory=QuotaLimits, description="each user's")


class QuotaSettings(BaseModel):
    """Limits per tenant and per user: an entry overrides the limits it names of the default."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    enabled: bool = True
    default: QuotaDefaults = Field(default_factory=QuotaDefaults)
    tenants: dict[str, QuotaLimits] = Field(default_factory=dict, description="tenant → limits")
    users: dict[str, QuotaLimits] = Field(
        default_factory=dict, description="'tenant/user' → limits"
    )
    slot_grace_seconds: float = Field(default=30.0, ge=0)
    """A slot this young is never checked against its run (the run may be starting)."""
    slot_max_age_seconds: float = Field(default=86_400.0, gt=0)
    """A slot this old is dropped without asking (a backstop when runs cannot be asked)."""
    concurrency_retry_after_seconds: float = Field(default=5.0, gt=0)
    max_attempts: int = Field(default=64, ge=1, description="compare-and-set attempts")

    @field_validator("tenants")
    @classmethod
    def _tenant_names(cls, tenants: dict[str, QuotaLimits]) -> dict[str, QuotaLimits]:
        for name in tenants:
            if not re.fullmatch(TENANT_PATTERN, name):
                raise ValueError(f"tenants: {name!r} is not a tenant name ({TENANT_PATTERN})")
        return tenants

    @field_validator("users")
    @classmethod
    def _user_names(cls, users: dict[str, QuotaLimits]) -> dict[str, QuotaLimits]:
        for name in users:
            tenant, _, user = name.partition("/")
            if not re.fullmatch(TENANT_PATTERN, tenant) or not re.fullmatch(r"\S+", user):
                raise ValueError(f"users: {name!r} is not 'tenant/user'")
        return users

    def limits_for(self, principal: Principal) -> tuple[QuotaLimits, QuotaLimits]:
        """``(the tenant's limits, the user's)``."""
        tenant = self.tenants.get(principal.tenant)
        user = self.users.get(f"{principal.tenant}/{principal.id}")
        return (
            self.default.tenant if tenant is None else tenant.over(self.default.tenant),
            self.default.user if user is None else user.over(self.default.user),
        )


class QuotaExceeded(FunctionError):
    """A limit refuses; ``refusal`` says which, for whom, and when to retry."""

    def __init__(self, refusal: QuotaRefusal) -> None:
        super().__init__(QUOTA_EXCEEDED_ERROR, refusal.message())
        self.refusal = refusal

    @property
    def kind(self) -> QuotaKind:
        return self.refusal.kind

    @property
    def retry_after_seconds(self) -> float:
        return self.refusal.retry_after_seconds


QuotaContention = Contention
"""Every compare-and-set attempt on the counters lost a race: nothing was written; retry."""


@dataclass(frozen=True, slots=True)
class Subject:
    kind: QuotaSubject
    tenant: str
    user: str | None
    limits: QuotaLimits

    @property
    def key(self) -> str:
        return subject_key(self.tenant, self.user)

    def exceeded(self, kind: QuotaKind, limit: int, retry_after: float) -> QuotaExceeded:
        refusal = QuotaRefusal(
            kind=kind,
            subject=self.kind,
            tenant=self.tenant,
            user=self.user,
            limit=limit,
            retry_after_seconds=round(retry_after, 3),
        )
        return QuotaExceeded(refusal)


def subjects(settings: QuotaSettings, principal: Principal) -> list[Subject]:
    """The user, then the tenant: the narrower limit is tried (and undone) first."""
    tenant, user = settings.limits_for(principal)
    return [
        Subject("user", principal.tenant, principal.id, user),
        Subject("tenant", principal.tenant, None, tenant),
    ]
