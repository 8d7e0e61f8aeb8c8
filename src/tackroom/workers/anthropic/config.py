"""The ``anthropic`` worker's contract: its config and shipped profile (no SDK import here).

The shipped profile ``anthropic`` serves ``provider::anthropic::stream``, ``::complete`` and
``::check`` against ``https://api.anthropic.com`` with ``ANTHROPIC_API_KEY``; more profiles
(another base URL, a proxy, a second account) are configuration::

    worker_config:
      anthropic:
        profiles:
          anthropic: {thinking: enabled, thinking_budget: 8000, fallback_model: claude-haiku-4-5}
          claude-eu: {base_url: "https://proxy.example/anthropic", api_key_env: EU_ANTHROPIC_KEY}
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tackroom.kit.providers.config import ProfilesConfig, ProfileSettings
from tackroom.kit.providers.shipped import ANTHROPIC_PROFILES as DEFAULT_PROFILES
from tackroom.kit.providers.shipped import ANTHROPIC_WORKER as WORKER_NAME

__all__ = ["DEFAULT_PROFILES", "WORKER_NAME", "AnthropicConfig", "AnthropicProfile"]


class AnthropicProfile(ProfileSettings):
    """A Messages API endpoint."""

    prompt_caching: bool = Field(
        default=True,
        description="cache_control on the system prompt, the last tool and two rolling anchors",
    )
    thinking: Literal["off", "enabled", "adaptive"] = Field(
        default="off", description="extended thinking: off, enabled (with a budget) or adaptive"
    )
    thinking_budget: int = Field(default=4096, ge=1024, description="tokens, when enabled")
    send_temperature: bool = Field(
        default=False,
        description="send the request's temperature (the SDK no longer has the parameter)",
    )
    default_max_output_tokens: int = Field(
        default=8192,
        ge=1,
        description="max_tokens when the request sets none (capped by the catalog's limit)",
    )


class AnthropicConfig(ProfilesConfig[AnthropicProfile]):
    """The ``anthropic`` worker's section: profiles (merged over the shipped ones), defaults."""

    shipped = DEFAULT_PROFILES
