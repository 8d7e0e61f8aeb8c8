"""A client-side rate limit: token buckets for requests and tokens per minute.

One :class:`RateLimiter` per profile is shared by all of that profile's calls. Waiters are served
in arrival order (a lock), so a large request is not starved by small ones. The token bucket is
charged an estimate before the call and corrected with the reported usage after it; a correction
may take the bucket below zero, which delays the next calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tackroom.kit.providers.config import RateLimitSettings

__all__ = ["RateLimiter", "TokenBucket", "estimate_tokens"]


def estimate_tokens(characters: int) -> int:
    """A rough token count for ``characters`` of prompt (four characters a token)."""
    return max(1, characters // 4)


class TokenBucket:
    """``capacity`` units, refilled at ``per_second``; ``take`` waits until enough are there."""

    def __init__(
        self,
        *,
        capacity: float,
        per_second: float,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        if capacity <= 0 or per_second <= 0:
            raise ValueError("a token bucket needs a positive capacity and refill rate")
        self.capacity = capacity
        self.per_second = per_second
        self._clock = clock
        self._sleep = sleep
        self._level = capacity
        self._stamp = clock()
        self._lock = asyncio.Lock()

    @property
    def level(self) -> float:
        self._refill()
        return self._level

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._stamp)
        self._stamp = now
        self._level = min(self.capacity, self._level + elapsed * self.per_second)

    async def take(self, amount: float = 1.0) -> float:
        """Take ``amount`` (at most ``capacity``); return the seconds spent waiting."""
        amount = min(amount, self.capacity)
        waited = 0.0
        async with self._lock:
            while True:
                self._refill()
                if self._level >= amount:
                    self._level -= amount
                    return waited
                wait = (amount - self._level) / self.per_second
                waited += wait
                await self._sleep(wait)

    def adjust(self, amount: float) -> None:
        """Charge (positive) or refund (negative) ``amount`` without waiting."""
        self._refill()
        self._level = min(self.capacity, self._level - amount)


class RateLimiter:
    """Requests and tokens per minute for one profile; a no-op when neither is set."""

    def __init__(
        self,
        settings: RateLimitSettings,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self.requests: TokenBucket | None = None
        self.tokens: TokenBucket | None = None
        if settings.requests_per_minute is not None:
            rpm = settings.requests_per_minute
            self.requests = TokenBucket(
                capacity=settings.burst or rpm, per_second=rpm / 60.0, clock=clock, sleep=sleep
            )
        if settings.tokens_per_minute is not None:
            tpm = settings.tokens_per_minute
            self.tokens = TokenBucket(capacity=tpm, per_second=tpm / 60.0, clock=clock, sleep=sleep)

    async def acquire(self, estimated_tokens: int) -> float:
        """Wait for one request and ``estimated_tokens``; return the seconds waited."""
        waited = 0.0
        if self.requests is not None:
            waited += await self.requests.take(1.0)
        if self.tokens is not None:
            waited += await self.tokens.take(float(estimated_tokens))
        return waited

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct the token bucket once the call reported its real usage."""
        if self.tokens is not None and actual_tokens > 0:
            self.tokens.adjust(float(actual_tokens - estimated_tokens))
