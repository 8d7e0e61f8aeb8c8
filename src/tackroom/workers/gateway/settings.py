"""The ``gateway`` worker's config section (``worker_config.gateway``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from tackroom.contracts.context import ContextSettings
from tackroom.contracts.principal import Principal
from tackroom.contracts.turn import Mode
from tackroom.runtime.worker import WorkerConfig
from tackroom.workers.gateway.auth import MIN_TOKEN_CHARS, default_token_path, usable

__all__ = ["GatewayConfig", "RunDefaults"]

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

    @field_validator("token")
    @classmethod
    def _usable_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not usable(value.get_secret_value()):
            raise ValueError(
                f"the token must be at least {MIN_TOKEN_CHARS} printable ASCII characters with no"
                " space"
            )
        return value
