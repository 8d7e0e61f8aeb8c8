"""The ``anthropic`` worker's name and shipped profiles as plain data (cheap to import)."""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_PROFILES", "WORKER_NAME"]

WORKER_NAME = "anthropic"

DEFAULT_PROFILES: dict[str, dict[str, Any]] = {
    "anthropic": {
        "base_url": "https://api.anthropic.com",
        "api_key_env": "ANTHROPIC_API_KEY",
    },
}
"""The profiles every ``anthropic`` worker serves unless its config drops them."""
