"""What provider workers serve beside the stream contract: ``provider::<name>::check``.

``check`` tells whether a provider can be called — a key is set, a local server answers — so a
command line can say what is missing before it starts a run. It never returns a key. A provider
worker without ``check`` is simply assumed ready.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from tackroom.contracts.messages import SCHEMA_VERSION
from tackroom.workers.providers.routing import check_function

__all__ = ["CheckResult", "check_function"]


class CheckResult(BaseModel):
    """The answer of ``provider::<name>::check`` (``{}`` or ``null`` as request)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    provider: str
    ready: bool
    problem: str | None = None
    """What is missing, in words a person can act on (``None`` when ready)."""
    key_source: Literal["keys_env", "vault", "env", "none"]
    keys: int
    """How many keys are set (round-robin); never the keys themselves."""
    base_url: str
