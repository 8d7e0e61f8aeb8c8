"""The ``openai`` worker's contract: its config and the profiles it ships (no SDK import here).

Every profile registers ``provider::<name>::stream``, ``::complete`` and ``::check`` (see
:mod:`tackroom.contracts.provider`). The shipped profiles cover OpenAI itself and the common
OpenAI-compatible servers; any other one is configuration::

    worker_config:
      openai:
        profiles:
          ollama: {base_url: "http://gpu-box:11434/v1"}      # change one field of a shipped one
          together: {base_url: "https://api.together.xyz/v1", api_key_env: TOGETHER_API_KEY}
          deepseek: null                                     # drop a shipped one
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tackroom.kit.providers.config import ProfilesConfig, ProfileSettings
from tackroom.kit.providers.shipped import OPENAI_PROFILES as DEFAULT_PROFILES
from tackroom.kit.providers.shipped import OPENAI_WORKER as WORKER_NAME

__all__ = ["DEFAULT_PROFILES", "WORKER_NAME", "OpenAIConfig", "OpenAIProfile"]


class OpenAIProfile(ProfileSettings):
    """A Chat Completions endpoint: OpenAI or an OpenAI-compatible server."""

    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = Field(
        default="max_tokens", description="how the output limit is named on this server"
    )
    stream_usage: bool = Field(
        default=True, description="ask for usage in the stream (stream_options.include_usage)"
    )
    system_role: Literal["system", "developer"] = "system"
    reasoning_effort: str | None = Field(
        default=None, description="sent as reasoning_effort (e.g. low, medium, high)"
    )
    parallel_tool_calls: bool | None = None
    prompt_cache_key: bool = Field(
        default=False, description="send the session id as prompt_cache_key (OpenAI only)"
    )


class OpenAIConfig(ProfilesConfig[OpenAIProfile]):
    """The ``openai`` worker's section: profiles (merged over the shipped ones), defaults."""

    shipped = DEFAULT_PROFILES
