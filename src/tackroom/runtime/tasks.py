"""Owned background tasks: every task has an owner that cancels and awaits it.

A ``TaskSet`` is the runtime's small stand-in for a task group whose lifetime is not one
``async with`` block (a worker's tasks live from its ``start`` until the host shuts down). A task
that fails (raises anything but ``CancelledError``) is reported to ``on_error`` at once; nothing
is fire-and-forget and no exception goes unretrieved.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["TaskErrorHandler", "TaskSet"]

T = TypeVar("T")

TaskErrorHandler = Callable[[asyncio.Task[Any], BaseException], None]

_log = logging.getLogger("tackroom.runtime")


class TaskSet:
    """A set of owned tasks, cancelled and awaited together by :meth:`cancel_all`."""

    def __init__(self, *, owner: str, on_error: TaskErrorHandler | None = None) -> None:
        self.owner = owner
        self._on_error = on_error
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run ``coro`` as a task owned by this set."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"task set of {self.owner!r} is closed")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if self._on_error is not None:
            self._on_error(task, exc)
        else:
            _log.error("task %r of %s failed", task.get_name(), self.owner, exc_info=exc)

    async def wait_all(self) -> None:
        """Wait until every task (including ones spawned meanwhile) has finished."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def cancel_all(self) -> None:
        """Close the set, cancel every task and wait for all of them to end."""
        self._closed = True
        while self._tasks:
            pending = set(self._tasks)
            for task in pending:
                task.cancel()
            await asyncio.wait(pending)
