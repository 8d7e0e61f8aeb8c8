"""Which worker serves a provider name, read from config alone (no SDK, no pydantic model).

``tackroom run --model ollama:qwen3`` must boot the ``openai`` worker, whose ``ollama``
profile serves ``provider::ollama::*``. :func:`provider_worker` answers that from the shipped
profiles of the profile-based workers (:mod:`tackroom.kit.providers.shipped`) and the
``profiles:`` of their config sections, without importing a worker. A provider name that is
no profile is left alone: it is taken as a worker of that name (the ``scripted`` worker, or a
user's own provider worker).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tackroom.kit.providers.profiles import profile_names
from tackroom.kit.providers.shipped import SHIPPED_PROFILES

__all__ = ["PROFILE_WORKERS", "provider_worker"]

PROFILE_WORKERS: Mapping[str, Mapping[str, Mapping[str, Any]]] = SHIPPED_PROFILES
"""Profile-based provider workers and the profiles they ship."""


def provider_worker(provider: str, worker_config: Mapping[str, Any]) -> str | None:
    """The worker serving ``provider`` through a profile, or ``None`` if no profile does."""
    for worker, defaults in PROFILE_WORKERS.items():
        section = worker_config.get(worker)
        overrides = section.get("profiles") if isinstance(section, Mapping) else None
        if provider in profile_names(defaults, overrides):
            return worker
    return None
