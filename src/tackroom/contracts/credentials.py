"""The public face of the ``credentials`` worker: its functions, payload models and error codes.

``auth::get_token`` is the only function that returns a secret; no model is ever offered
``auth::*`` as a tool (the orchestrator never offers it). Every other reply, every error message
and every log line names providers and fingerprints, never a token. Failures arrive as
``InvocationError`` whose ``remote_code`` is one of the ``*_ERROR`` codes below, or
``invalid_request`` when a payload does not validate.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, SecretStr, StringConstraints, field_serializer

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function

__all__ = [
    "AUTH_DELETE_TOKEN",
    "AUTH_GET_TOKEN",
    "AUTH_LIST_PROVIDERS",
    "AUTH_SET_TOKEN",
    "AUTH_STATUS",
    "DEFAULT_ENV_VARS",
    "INVALID_TOKEN_ERROR",
    "MAX_TOKEN_CHARS",
    "SCHEMA_VERSION",
    "VAULT_ERROR",
    "DeleteTokenResponse",
    "EmptyRequest",
    "ListProvidersResponse",
    "ProviderName",
    "ProviderRequest",
    "ProviderStatus",
    "SetTokenRequest",
    "SetTokenResponse",
    "Source",
    "StatusRequest",
    "StatusResponse",
    "TokenResponse",
    "env_var_for",
    "fingerprint",
]

SCHEMA_VERSION = 1

VAULT_ERROR = "vault_unavailable"
"""The vault file cannot be read or written, or is not a vault this worker reads."""
INVALID_TOKEN_ERROR = "invalid_token"
"""``set_token`` was given an empty token, or one with whitespace or control characters inside."""

MAX_TOKEN_CHARS = 16_384

DEFAULT_ENV_VARS: Mapping[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "moonshot": "MOONSHOT_API_KEY",
    "kimi": "MOONSHOT_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
"""Environment fallbacks by provider; any other provider reads ``<PROVIDER>_API_KEY``."""

ProviderName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_.-]{0,31}$")]
"""A lower-case letter, then letters, digits, ``_``, ``.`` or ``-``; at most 32 characters
(so a pasted API key is refused as a name rather than stored and logged as one)."""

Source = Literal["vault", "env", "none"]


def env_var_for(provider: str, mapping: Mapping[str, str] = DEFAULT_ENV_VARS) -> str:
    """The variable holding ``provider``'s token: mapped, else ``<PROVIDER>_API_KEY``."""
    mapped = mapping.get(provider)
    if mapped:
        return mapped
    return re.sub(r"[^A-Z0-9]", "_", provider.upper()) + "_API_KEY"


def fingerprint(token: str) -> str:
    """A short, one-way label for a token (``sha256:`` and 8 hex digits), safe to show and log."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:8]


class _Response(_Model):
    schema_version: int = SCHEMA_VERSION


class EmptyRequest(_Model):
    pass


class ProviderRequest(_Model):
    provider: ProviderName


class TokenResponse(_Response):
    """The reply of ``auth::get_token``: the one reply that carries a secret."""

    provider: str
    token: str | None = Field(repr=False)
    source: Source


class SetTokenRequest(_Model):
    provider: ProviderName
    token: SecretStr = Field(min_length=1, max_length=MAX_TOKEN_CHARS)

    @field_serializer("token", when_used="json")
    def _token_on_the_wire(self, token: SecretStr) -> str:
        """Sent as it is (storing it is the point of the call); ``repr`` and ``str`` still hide
        it, and so does a Python-mode dump."""
        return token.get_secret_value()


class SetTokenResponse(_Response):
    provider: str
    stored: bool
    fingerprint: str


class DeleteTokenResponse(_Response):
    provider: str
    deleted: bool = Field(description="whether the vault held a token for the provider")
    source: Source = Field(description="where a token still comes from (env, or none)")


class ListProvidersResponse(_Response):
    providers: list[str] = Field(description="providers with a token, in the vault or the env")
    known: list[str] = Field(description="providers with a mapped environment variable")


class StatusRequest(_Model):
    provider: ProviderName | None = None


class ProviderStatus(_Model):
    configured: bool
    source: Source
    fingerprint: str | None = Field(description="sha256 prefix of the token in use, never it")
    env_var: str = Field(description="the environment variable read when the vault has none")


class StatusResponse(_Response):
    providers: dict[str, ProviderStatus]


AUTH_GET_TOKEN: Function[ProviderRequest, TokenResponse] = Function(
    "auth::get_token",
    ProviderRequest,
    TokenResponse,
    description="A provider's API token (vault first, then its environment variable). Returns a "
    "secret: never offer it to a model.",
)
AUTH_SET_TOKEN: Function[SetTokenRequest, SetTokenResponse] = Function(
    "auth::set_token",
    SetTokenRequest,
    SetTokenResponse,
    description="Store a provider's API token in the vault (0600 file, atomic write).",
)
AUTH_DELETE_TOKEN: Function[ProviderRequest, DeleteTokenResponse] = Function(
    "auth::delete_token",
    ProviderRequest,
    DeleteTokenResponse,
    description="Remove a provider's token from the vault.",
)
AUTH_LIST_PROVIDERS: Function[EmptyRequest, ListProvidersResponse] = Function(
    "auth::list_providers",
    EmptyRequest,
    ListProvidersResponse,
    description="Providers with a token (vault or environment) and providers with a known "
    "variable.",
)
AUTH_STATUS: Function[StatusRequest, StatusResponse] = Function(
    "auth::status",
    StatusRequest,
    StatusResponse,
    description="Per provider: configured, source and a fingerprint; never the token.",
)
