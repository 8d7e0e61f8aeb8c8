"""The profiles the shipped provider workers serve, as plain data (cheap to import).

A profile is a provider name a profile-based worker serves (``ollama`` is served by the
``openai`` worker): its base URL, key variable and wire quirks. The data lives here, below the
workers, so that :mod:`tackroom.kit.providers.routing` can tell which worker serves a provider
name without importing any worker; each worker's config lays its section over its table.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ANTHROPIC_PROFILES",
    "ANTHROPIC_WORKER",
    "OPENAI_PROFILES",
    "OPENAI_WORKER",
    "SHIPPED_PROFILES",
]

OPENAI_WORKER = "openai"

OPENAI_PROFILES: dict[str, dict[str, Any]] = {
    "openai": {
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
        "max_tokens_param": "max_completion_tokens",
        "prompt_cache_key": True,
    },
    "ollama": {
        "base_url": "http://localhost:11434/v1",
        "api_key_env": "OLLAMA_API_KEY",
        "requires_key": False,
        "placeholder_key": "ollama",
        "hint": "start it with `ollama serve` (and fetch the model with `ollama pull MODEL`)",
    },
    "vllm": {
        "base_url": "http://localhost:8000/v1",
        "api_key_env": "VLLM_API_KEY",
        "requires_key": False,
        "hint": "start it with `vllm serve MODEL`",
    },
    "lmstudio": {
        "base_url": "http://localhost:1234/v1",
        "api_key_env": "LMSTUDIO_API_KEY",
        "requires_key": False,
        "placeholder_key": "lm-studio",
        "hint": "start the server in LM Studio (Developer tab) or with `lms server start`",
    },
    "llamacpp": {
        "base_url": "http://localhost:8080/v1",
        "api_key_env": "LLAMACPP_API_KEY",
        "requires_key": False,
        "hint": "start it with `llama-server -m MODEL.gguf --port 8080 --jinja`",
    },
    "deepseek": {
        "base_url": "https://api.deepseek.com/v1",
        "api_key_env": "DEEPSEEK_API_KEY",
    },
    "moonshot": {
        "base_url": "https://api.moonshot.ai/v1",
        "api_key_env": "MOONSHOT_API_KEY",
        "aliases": ["kimi"],
    },
    "openrouter": {
        "base_url": "https://openrouter.ai/api/v1",
        "api_key_env": "OPENROUTER_API_KEY",
        "headers": {"X-Title": "tackroom"},
        "extra_body": {"usage": {"include": True}},
    },
}
"""The profiles every ``openai`` worker (Chat Completions) serves unless its config drops them."""

ANTHROPIC_WORKER = "anthropic"

ANTHROPIC_PROFILES: dict[str, dict[str, Any]] = {
    "anthropic": {
        "base_url": "https://api.anthropic.com",
        "api_key_env": "ANTHROPIC_API_KEY",
    },
}
"""The profiles every ``anthropic`` worker serves unless its config drops them."""

SHIPPED_PROFILES: dict[str, dict[str, dict[str, Any]]] = {
    OPENAI_WORKER: OPENAI_PROFILES,
    ANTHROPIC_WORKER: ANTHROPIC_PROFILES,
}
"""Profile-based provider workers, by worker name, and the profiles they ship."""
