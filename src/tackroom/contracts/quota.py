"""Rate limits and a concurrency cap per tenant and per user: the refusal, and the shared state.

:mod:`tackroom.kit.quota` enforces ``requests_per_minute``, ``tokens_per_minute`` and
``max_concurrent_runs`` for a principal's tenant and for the principal itself, with its counts in
the engine's state, so every process on one engine (every gateway replica) shares them. This
module is what crosses processes: the error code and the refusal's shape (the details of a 429
answer, whose ``Retry-After`` is :meth:`QuotaRefusal.retry_after_header`), and the records kept.

State (every write compare-and-set on the value's revision):

- ``quota-rates`` / :func:`subject_key` → :class:`RateState`: one "theoretical arrival time" per
  rate (a continuously refilled allowance of one minute's worth, GCRA);
- ``quota-runs`` / :func:`subject_key` → :class:`RunSlots`: the runs holding a concurrency slot.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function, Scope
from tackroom.contracts.principal import Principal

__all__ = [
    "ADMIT",
    "QUOTA_CONTENTION_ERROR",
    "QUOTA_EXCEEDED_ERROR",
    "RATES",
    "RELEASE",
    "RUNS",
    "AdmitRequest",
    "Admitted",
    "QuotaKind",
    "QuotaRefusal",
    "QuotaSubject",
    "RateState",
    "ReleaseRequest",
    "Released",
    "RunSlot",
    "RunSlots",
    "subject_key",
]

QUOTA_EXCEEDED_ERROR = "quota_exceeded"
"""A limit refuses: over HTTP a 429 with ``Retry-After``."""
QUOTA_CONTENTION_ERROR = "contention"
"""The counters kept changing under every compare-and-set attempt; nothing written; retry."""

QuotaKind = Literal["requests_per_minute", "tokens_per_minute", "max_concurrent_runs"]
QuotaSubject = Literal["tenant", "user"]


class QuotaRefusal(_Model):
    """Which limit refused whom, and when to try again."""

    schema_version: int = 1
    kind: QuotaKind
    subject: QuotaSubject = Field(description="the tenant's limit, or the user's own")
    tenant: str
    user: str | None = Field(default=None, description="the user (set for a user's limit)")
    limit: int
    retry_after_seconds: float = Field(ge=0)

    def retry_after_header(self) -> str:
        """Whole seconds, rounded up, at least 1: the ``Retry-After`` value."""
        return str(max(1, math.ceil(self.retry_after_seconds)))

    def message(self) -> str:
        who = f"tenant {self.tenant}" if self.user is None else f"user {self.tenant}/{self.user}"
        return (
            f"quota exceeded: {who} is at its {self.kind} limit ({self.limit}); "
            f"retry in {self.retry_after_header()} s"
        )


class RateState(_Model):
    """A subject's rates: each is the time its allowance is whole again (past: it is whole)."""

    schema_version: int = 1
    requests_tat: float = 0.0
    tokens_tat: float = 0.0


class RunSlot(_Model):
    session_id: str
    acquired_at: float


class RunSlots(_Model):
    schema_version: int = 1
    slots: dict[str, RunSlot] = Field(default_factory=dict, description="run id → its slot")


RATES: Scope[RateState] = Scope("quota-rates", RateState)
RUNS: Scope[RunSlots] = Scope("quota-runs", RunSlots)


def subject_key(tenant: str, user: str | None = None) -> str:
    """``tenant/<tenant>`` or ``user/<tenant>~<user>`` (a tenant name never holds ``~``)."""
    return f"tenant/{tenant}" if user is None else f"user/{tenant}~{user}"


# -- the quota worker's functions (the gateway asks before it starts a run) --------------------


class AdmitRequest(_Model):
    schema_version: int = 1
    principal: Principal
    run_id: str = Field(min_length=1, max_length=200)
    session_id: str = Field(min_length=1, max_length=300, description="the stored session id")


class Admitted(_Model):
    """``admitted`` false: ``refusal`` says which limit, and when to try again."""

    schema_version: int = 1
    admitted: bool
    refusal: QuotaRefusal | None = None
    requests_remaining: int | None = None


class ReleaseRequest(_Model):
    schema_version: int = 1
    principal: Principal
    run_id: str = Field(min_length=1, max_length=200)


class Released(_Model):
    schema_version: int = 1


ADMIT: Function[AdmitRequest, Admitted] = Function(
    "quota::admit",
    AdmitRequest,
    Admitted,
    description="Take one request of the principal's and its tenant's rates and hold a run slot,"
    " or say which limit refuses and when to retry.",
)
RELEASE: Function[ReleaseRequest, Released] = Function(
    "quota::release",
    ReleaseRequest,
    Released,
    description="Give back a run's slot (a run that did not start, or has ended).",
)
