"""The ``anthropic`` worker: the Messages API with tools, thinking and prompt caching.

Each profile of its config (the shipped ``anthropic`` one merged with
``worker_config.anthropic.profiles``) registers ``provider::<name>::stream``, ``::complete``
and ``::check``. See ``docs/workers/providers.md``.
"""

from __future__ import annotations

from tackroom.kit.providers.hosting import ProfileWorker
from tackroom.workers.anthropic.config import WORKER_NAME, AnthropicConfig

__all__ = ["WORKER", "start_anthropic"]

_WORKER = ProfileWorker(
    name=WORKER_NAME,
    description=(
        "The Messages API over the official anthropic SDK: text, tool_use, thinking with"
        " signatures, prompt caching, usage with cache reads and writes."
    ),
    config_model=AnthropicConfig,
    wire="tackroom.workers.anthropic.wire",
    package="anthropic",
    adapter="AnthropicAdapter",
)

start_anthropic = _WORKER.start
"""Boot the worker through a context (``runtime`` and ``environ`` are for tests)."""

WORKER = _WORKER.spec()
