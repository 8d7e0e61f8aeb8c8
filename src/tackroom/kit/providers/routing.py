"""Which worker serves a provider name, read from config alone (no SDK, no pydantic model).

``tackroom run --model ollama:qwen3`` must boot the ``openai`` worker, whose ``ollama``
profile serves ``provider::ollama::*``. :func:`provider_worker` answers that from the shipped
profiles of the profile-based workers and the ``profiles:`` of their config sections. A
provider name that is no profile is left alone: it is taken as a worker of that name (the
``scripted`` worker, or a user's own provider worker).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tackroom.kit.providers.profiles import profile_names
from tackroom.workers.anthropic import profiles as anthropic_profiles
from tackroom.workers.openai import profiles as openai_profiles

__all__ = ["PROFILE_WORKERS", "provider_worker"]

PROFILE_WORKERS: dict[str, Mapping[str, Mapping[str, Any]]] = {
    openai_profiles.WORKER_NAME: openai_profiles.DEFAULT_PROFILES,
    anthropic_profiles.WORKER_NAME: anthropic_profiles.DEFAULT_PROFILES,
}
"""Profile-based provider workers and the profiles they ship."""


def provider_worker(provider: str, worker_config: Mapping[str, Any]) -> str | None:
    """The worker serving ``provider`` through a profile, or ``None`` if no profile does."""
    for worker, defaults in PROFILE_WORKERS.items():
        section = worker_config.get(worker)
        overrides = section.get("profiles") if isinstance(section, Mapping) else None
        if provider in profile_names(defaults, overrides):
            return worker
    return None
