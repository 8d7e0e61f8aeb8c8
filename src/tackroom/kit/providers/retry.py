"""Retry timing by error class, and the clock a provider worker runs on (injectable in tests)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tackroom.kit.providers.config import RetrySettings
from tackroom.kit.providers.errors import ProviderFailure

__all__ = ["DEFAULT_RUNTIME", "Runtime", "retry_delay"]


@dataclass(frozen=True, slots=True)
class Runtime:
    """What a provider worker waits and draws with: replace it to make retries instant."""

    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    random: Callable[[], float] = field(default=random.random)


DEFAULT_RUNTIME = Runtime()


def retry_delay(
    settings: RetrySettings,
    failure: ProviderFailure,
    *,
    retry: int,
    elapsed: float,
    draw: Callable[[], float],
) -> float | None:
    """Seconds to wait before retry number ``retry`` (1-based), or ``None``: do not retry.

    ``None`` when the kind is never retried, retries are used up, the server asks for a wait
    longer than ``max_retry_after``, or the wait would end past the ``deadline``.
    """
    if not failure.retryable or retry > settings.max_retries:
        return None
    if failure.retry_after is not None:
        if failure.retry_after > settings.max_retry_after:
            return None
        delay = failure.retry_after
    else:
        backoff = settings.base_delay * settings.multiplier ** (retry - 1)
        capped = min(settings.max_delay, backoff)
        delay = capped * (1.0 - settings.jitter * draw())
    if elapsed + delay > settings.deadline:
        return None
    return max(0.0, delay)
