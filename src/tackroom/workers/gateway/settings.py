"""The ``gateway`` worker's config section (``worker_config.gateway``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from tackroom.contracts.context import ContextSettings
from tackroom.contracts.principal import DEFAULT_TENANT, TENANT_PATTERN, Principal
from tackroom.contracts.turn import Mode
from tackroom.runtime.worker import WorkerConfig
from tackroom.workers.gateway.auth import MIN_TOKEN_CHARS, default_token_path, usable
from tackroom.workers.gateway.oidc import OidcSettings

__all__ = ["AuthSettings", "GatewayConfig", "RunDefaults"]

_MIB = 1024 * 1024


class RunDefaults(WorkerConfig):
    """What ``POST /v1/runs`` uses for what its body leaves out; ``tackroom serve`` fills it from
    ``agent.*`` (``model``, ``tools``, ``mode``, ``max_turns``, ``principal``, ``context``: the
    budget ``POST /v1/sessions/{id}/compact`` aims at)."""

    model: str | None = Field(default=None, description="PROVIDER:MODEL; none: a run must name one")
    tools: list[str] = Field(default_factory=list)
    mode: Mode = "agent"
    max_turns: int = Field(default=8, ge=1, le=1000)
    principal: Principal | None = None
    context: ContextSettings | None = None


class AuthSettings(WorkerConfig):
    """How the gateway tells who is calling (``docs/security.md``); what each may do is the
    policy's to say (``policy::authorize``)."""

    shared_token: bool = Field(
        default=True,
        description="accept the gateway's one shared token (one-person local use; turn off for a"
        " team)",
    )
    shared_token_user: str = Field(default="owner", min_length=1, max_length=200)
    shared_token_tenant: str = Field(default=DEFAULT_TENANT, pattern=TENANT_PATTERN)
    shared_token_roles: list[str] = Field(
        default_factory=lambda: ["admin", "impersonate"],
        description="the shared token's holder owns the gateway: every action, and naming the"
        " principal a run acts for",
    )
    api_keys: bool = Field(default=True, description="accept per-user keys (tackroom keys create)")
    api_key_cache_seconds: float = Field(
        default=5.0, ge=0, le=300, description="a revoked key works at most this long after"
    )
    oidc: OidcSettings | None = Field(
        default=None, description="accept OIDC access tokens (JWT) from this issuer"
    )
    authenticator: str | None = Field(
        default=None,
        description="module:attribute of your own authenticator, asked before the others",
    )


class GatewayConfig(WorkerConfig):
    enabled: bool = Field(
        default=True, description="whether tackroom serve boots the gateway (false: it does not)"
    )
    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(
        default=8787,
        ge=0,
        le=65535,
        description="0: any free port; unset: 8787, or the next free of the nine after it",
    )
    token: SecretStr | None = Field(
        default=None, description=f"a fixed bearer token (at least {MIN_TOKEN_CHARS} characters)"
    )
    token_path: Path | None = Field(
        default_factory=default_token_path,
        description="where the token is kept (generated 0600 at first start); null: token only",
    )
    cors_origins: list[str] = Field(
        default_factory=list, description="origins allowed by CORS; empty: CORS is off"
    )
    max_body_bytes: int = Field(default=_MIB, ge=1024)
    heartbeat_seconds: float = Field(default=15.0, gt=0)
    send_timeout_seconds: float = Field(
        default=30.0, gt=0, description="an SSE client that takes nothing for this long is dropped"
    )
    max_streams: int = Field(default=1000, ge=1, description="concurrent SSE streams")
    call_timeout_seconds: float = Field(default=30.0, gt=0)
    shutdown_seconds: int = Field(
        default=2, ge=0, description="how long a stop waits for requests in flight"
    )
    defaults: RunDefaults = Field(default_factory=RunDefaults)
    auth: AuthSettings = Field(default_factory=AuthSettings)

    @field_validator("token")
    @classmethod
    def _usable_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not usable(value.get_secret_value()):
            raise ValueError(
                f"the token must be at least {MIN_TOKEN_CHARS} printable ASCII characters with no"
                " space"
            )
        return value
