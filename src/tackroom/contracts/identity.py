"""Per-user API keys: the record kept in the engine, and the key's shape.

A key is ``tk_<key id>_<secret>``: the key id (12 hex digits) finds the record, and only the
SHA-256 of the secret is kept, so the store holds nothing that signs a request. A key is shown
once, when it is made (``tackroom keys create``). The secret is 256 random bits, so a plain hash
is the right tool (a slow password hash guards low-entropy secrets, which these are not).

The records live in the engine's state (scope ``api-keys``), so every gateway in front of one
engine, embedded or NATS, knows the same keys, and a revocation reaches them all.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tackroom.contracts.bus import Scope
from tackroom.contracts.principal import TENANT_PATTERN, Principal

__all__ = [
    "API_KEYS",
    "KEY_ID_PATTERN",
    "ApiKeyRecord",
    "MintedKey",
    "key_id_of",
    "mint_key",
    "secret_matches",
]

KEY_ID_PATTERN = r"^[0-9a-f]{12}$"
_KEY = re.compile(r"^tk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
_Role = Annotated[str, StringConstraints(pattern=r"^[^\s\x00-\x1f\x7f]{1,100}$")]


class ApiKeyRecord(BaseModel):
    """One key as kept: who it stands for, and the hash of its secret."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = 1
    key_id: str = Field(pattern=KEY_ID_PATTERN)
    secret_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tenant: str = Field(pattern=TENANT_PATTERN)
    user: str = Field(min_length=1, max_length=200, pattern=r"^[^\s\x00-\x1f\x7f]+$")
    roles: tuple[_Role, ...] = Field(default=(), max_length=64)
    label: str | None = Field(default=None, max_length=200)
    created_at: float
    expires_at: float | None = Field(default=None, description="unix seconds; none: never")
    revoked_at: float | None = None

    def principal(self) -> Principal:
        return Principal(id=self.user, roles=self.roles, tenant=self.tenant, method="api_key")

    def usable_at(self, now: float) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or now < self.expires_at


API_KEYS: Scope[ApiKeyRecord] = Scope("api-keys", ApiKeyRecord)


class MintedKey(BaseModel):
    """A new key: the text to hand over (once) and the record to keep."""

    model_config = ConfigDict(frozen=True)

    text: str
    record: ApiKeyRecord


def mint_key(
    *,
    tenant: str,
    user: str,
    roles: tuple[str, ...],
    now: float,
    expires_at: float | None = None,
    label: str | None = None,
) -> MintedKey:
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    record = ApiKeyRecord(
        key_id=key_id,
        secret_sha256=_digest(secret),
        tenant=tenant,
        user=user,
        roles=roles,
        label=label,
        created_at=now,
        expires_at=expires_at,
    )
    return MintedKey(text=f"tk_{key_id}_{secret}", record=record)


def key_id_of(text: str) -> tuple[str, str] | None:
    """``(key id, secret)`` of a key's text; ``None``: not shaped like a key."""
    match = _KEY.match(text)
    return None if match is None else (match.group(1), match.group(2))


def secret_matches(record: ApiKeyRecord, secret: str) -> bool:
    return hmac.compare_digest(_digest(secret), record.secret_sha256)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
