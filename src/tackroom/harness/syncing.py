"""The private event loop of ``Harness.sync`` (and so ``run_sync``): one per harness, kept between
calls, closed at exit.

The workers a harness hosts live on the loop that started them, so synchronous calls must all
run on one loop — not a fresh ``asyncio.run`` each. A program that never closes the harness
still shuts its workers down: the loop closes the harness when the interpreter exits.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tackroom.harness.errors import UsageError

__all__ = ["SyncLoop"]

T = TypeVar("T")

Closer = Callable[[], Coroutine[Any, Any, None]]


class SyncLoop:
    def __init__(self, close: Closer) -> None:
        self._close = weakref.WeakMethod(close)
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            if inspect.iscoroutine(coro):
                coro.close()
            raise UsageError(
                "a synchronous call (run_sync, sync) was made inside a running event loop:"
                " await the coroutine instead (await harness.run(...))"
            )
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
            atexit.register(self.close)
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        """Close the harness on the loop, then the loop (idempotent)."""
        loop, self._loop = self._loop, None
        if loop is None or loop.is_closed():
            return
        atexit.unregister(self.close)
        close = self._close()
        try:
            if close is not None:
                loop.run_until_complete(close())
        finally:
            loop.close()
