"""Start an engine for a test and close it afterwards, whatever the test does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

from tackroom.engine import Engine, QueueConfig, open_engine

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from tackroom.engine.tracing import SpanMode

__all__ = ["FAST_QUEUE", "MEMORY_URL", "memory_engine", "running_engine"]

MEMORY_URL = "embedded::memory:"

FAST_QUEUE = QueueConfig(
    max_deliveries=3, visibility_timeout=10.0, backoff_initial=0.01, backoff_max=0.05
)
"""A queue policy for tests: quick retries, and a lease long enough never to expire by accident.

``await engine.configure_queue("jobs", FAST_QUEUE)``, or ``dataclasses.replace`` it to tune.
"""


@asynccontextmanager
async def running_engine(
    url: str, *, tracer_provider: TracerProvider | None = None, trace_spans: SpanMode = "steps"
) -> AsyncIterator[Engine]:
    """Open the engine ``url`` names, start it, yield it, and close it on the way out."""
    engine = open_engine(url, tracer_provider=tracer_provider, trace_spans=trace_spans)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.close()


def memory_engine(
    *, tracer_provider: TracerProvider | None = None
) -> AbstractAsyncContextManager[Engine]:
    """A throwaway in-memory embedded engine (``async with memory_engine() as engine:``)."""
    return running_engine(MEMORY_URL, tracer_provider=tracer_provider)
