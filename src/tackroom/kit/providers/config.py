"""Config shared by the provider workers: profiles, retries, the client-side rate limit.

A **profile** is one provider name served by a worker: ``provider::<name>::stream`` and
``::complete`` for a base URL, its keys and its limits. A worker ships default profiles; the
``profiles:`` mapping of its config section is merged over them **field by field** (name a
shipped profile to change one field of it, map it to ``null`` to drop it, give a new name to add
one). ``retry:`` and ``rate_limit:`` at the top of the section apply to every profile that does
not set its own. :class:`ProfilesConfig` is such a section, for a worker's own profile model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tackroom.kit.providers.profiles import merge_profiles
from tackroom.runtime.worker import WorkerConfig

__all__ = [
    "PROVIDER_NAME_PATTERN",
    "ProfileSettings",
    "ProfilesConfig",
    "RateLimitSettings",
    "RetrySettings",
    "check_profile_names",
    "merge_profiles",
]

PROVIDER_NAME_PATTERN = r"^[a-zA-Z0-9_-]+$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetrySettings(_Section):
    """When and how long to retry a failed call (only before any output was streamed).

    ``rate_limited`` (429) waits the server's ``Retry-After`` (or backs off without one);
    ``transient`` (5xx, connection lost, timeout, a malformed stream) backs off exponentially
    with jitter; ``auth``, ``context_overflow`` and ``permanent`` (every other 4xx) are never
    retried.
    """

    max_retries: int = Field(
        default=2, ge=0, le=20, description="retries after the first try (seed 003: two)"
    )
    base_delay: float = Field(default=0.5, ge=0, description="first backoff, seconds")
    multiplier: float = Field(default=2.0, ge=1)
    max_delay: float = Field(default=20.0, ge=0, description="longest backoff, seconds")
    jitter: float = Field(
        default=0.5, ge=0, le=1, description="fraction of each backoff drawn at random"
    )
    max_retry_after: float = Field(
        default=60.0,
        ge=0,
        description="longest Retry-After honoured; a longer one ends the call at once",
    )
    deadline: float = Field(
        default=240.0,
        gt=0,
        description="no retry starts if its wait would end later than this after the call began",
    )


class RateLimitSettings(_Section):
    """A client-side token bucket per profile, shared by all of that profile's calls."""

    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(
        default=None,
        gt=0,
        description="estimated request tokens before the call, corrected by the reported usage",
    )
    burst: float | None = Field(
        default=None, gt=0, description="bucket size in requests (default: one minute's worth)"
    )

    @property
    def enabled(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None


class ProfileSettings(_Section):
    """One provider name served by a worker (fields shared by every provider worker)."""

    base_url: str = Field(description="the API's base URL")
    api_key_env: str | None = Field(
        default=None, description="env var holding the key (comma-separated: several keys)"
    )
    keys_env: list[str] = Field(
        default_factory=list,
        description="env vars holding keys used in round-robin; when set they win",
    )
    credential: str | None = Field(
        default=None,
        description="name asked of auth::get_token (default: the profile's name)",
    )
    requires_key: bool = Field(
        default=True, description="false for local servers: call without a key"
    )
    placeholder_key: str = Field(
        default="not-needed", description="sent when no key is needed and none is set"
    )
    headers: dict[str, str] = Field(default_factory=dict, description="default HTTP headers")
    aliases: list[str] = Field(
        default_factory=list, description="more provider names served by this profile"
    )
    fallback_model: str | None = Field(
        default=None, description="tried once when retries are exhausted"
    )
    catalog_provider: str | None = Field(
        default=None, description="provider name for models::get (default: the profile's)"
    )
    catalog: bool = Field(
        default=True,
        description="false: never ask models::get (a server the catalog does not list): no"
        " limits known, usage priced at 0, nothing logged about it",
    )
    timeout: float = Field(default=600.0, gt=0, description="seconds; also between two chunks")
    connect_timeout: float = Field(default=10.0, gt=0)
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="extra JSON fields sent with every request"
    )
    hint: str | None = Field(
        default=None, description="how to start the server, shown when it cannot be reached"
    )
    tool_calling: Literal["native", "text"] = Field(
        default="native",
        description="text: the model has no native tool calling; the turn describes the tools"
        " in the system prompt and reads calls written as tool_call blocks",
    )
    retry: RetrySettings | None = None
    rate_limit: RateLimitSettings | None = None

    @field_validator("aliases")
    @classmethod
    def _valid_aliases(cls, value: list[str]) -> list[str]:
        for alias in value:
            if not re.match(PROVIDER_NAME_PATTERN, alias):
                raise ValueError(f"alias {alias!r} must match {PROVIDER_NAME_PATTERN}")
        return value


def check_profile_names(profiles: Mapping[str, ProfileSettings]) -> None:
    """Raise ``ValueError`` if a profile name is malformed or a provider name is served twice."""
    seen: dict[str, str] = {}
    for name, profile in profiles.items():
        if not re.match(PROVIDER_NAME_PATTERN, name):
            raise ValueError(f"profile name {name!r} must match {PROVIDER_NAME_PATTERN}")
        for provider in [name, *profile.aliases]:
            if provider in seen:
                raise ValueError(f"provider name {provider!r} is used by {seen[provider]!r} too")
            seen[provider] = name


ProfileT = TypeVar("ProfileT", bound=ProfileSettings)


class ProfilesConfig(WorkerConfig, Generic[ProfileT]):
    """A profile-based provider worker's section: its profiles (``profiles:`` merged field by
    field over the ones it ships, :attr:`shipped`), and the retry and rate-limit defaults.

    A worker subclasses it with its profile model and sets ``shipped``::

        class OpenAIConfig(ProfilesConfig[OpenAIProfile]):
            shipped = OPENAI_PROFILES
    """

    shipped: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    """The profiles the worker serves unless its config drops them (plain data)."""

    profiles: dict[str, ProfileT] = Field(
        default_factory=dict,
        description="provider name → profile; merged field by field over the shipped profiles",
    )
    retry: RetrySettings = RetrySettings()
    rate_limit: RateLimitSettings = RateLimitSettings()

    @model_validator(mode="before")
    @classmethod
    def _merge_shipped(cls, data: Any) -> Any:
        if data is None:
            data = {}
        if isinstance(data, dict):
            return {**data, "profiles": merge_profiles(cls.shipped, data.get("profiles"))}
        return data

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        check_profile_names(self.profiles)
        return self
