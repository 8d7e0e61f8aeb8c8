"""Deadline-based waiting: poll a condition instead of sleeping a fixed time and hoping."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

__all__ = ["DEFAULT_WAIT", "WaitTimeout", "next_item", "take", "wait_until"]

T = TypeVar("T")

DEFAULT_WAIT = 10.0
"""Generous default deadline (seconds) for "eventually" assertions."""


class WaitTimeout(AssertionError):
    """A condition did not hold before its deadline (an ``AssertionError``, so pytest shows it)."""


async def wait_until(
    condition: Callable[[], object | Awaitable[object]],
    *,
    timeout: float = DEFAULT_WAIT,
    interval: float = 0.01,
    message: str | Callable[[], str] | None = None,
) -> None:
    """Poll ``condition`` (sync or async) every ``interval`` seconds until it is truthy.

    Raises :class:`WaitTimeout` if it still is not after ``timeout`` seconds. ``message`` (or a
    callable building it, evaluated at the deadline) explains what was awaited.
    """
    deadline = time.monotonic() + timeout
    while True:
        outcome = condition()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise WaitTimeout(f"condition not met within {timeout:g}s: {text or condition!r}")
        await asyncio.sleep(interval)


async def next_item(iterator: AsyncIterator[T], *, timeout: float = DEFAULT_WAIT) -> T:
    """The next item of an async iterator, or :class:`WaitTimeout` after ``timeout`` seconds."""
    try:
        return await asyncio.wait_for(anext(iterator), timeout)
    except TimeoutError:
        raise WaitTimeout(f"no item within {timeout:g}s from {iterator!r}") from None


async def take(iterator: AsyncIterator[T], count: int, *, timeout: float = DEFAULT_WAIT) -> list[T]:
    """The next ``count`` items of an async iterator, each awaited with ``timeout``."""
    return [await next_item(iterator, timeout=timeout) for _ in range(count)]
