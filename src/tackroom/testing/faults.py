"""``FaultyEngine``: any engine, with one chosen write failing — to prove what a crash or an
outage between two writes leaves behind.

Wrap an unstarted engine, run a workload once to count its writes (``writes`` lists them), then
run it again with ``fail_at=N`` for each ``N``: the ``N``-th write fails once, and everything
after it works again, as after a dropped connection. ``mode="before"`` fails it without writing
(the fault lands between writes ``N-1`` and ``N``); ``mode="after"`` writes it and then reports
a failure (a lost acknowledgement: the caller cannot tell it was stored).

Writes are ``set_state``, ``update_state``, ``delete_state``, ``append`` and ``enqueue``, by
every worker on the engine. Queue policies may be given a quick retry (``retry_backoff``), so a
failed delivery is retried in milliseconds rather than on the production schedule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, Unpack

from tackroom.engine.errors import EngineUnavailable
from tackroom.engine.protocol import Engine, EnqueueOptions, QueueConfig, StateEntry, UpdateOp

__all__ = ["FaultyEngine", "InjectedFault"]

T = TypeVar("T")


class InjectedFault(EngineUnavailable):
    """The write a :class:`FaultyEngine` was told to fail."""


class FaultyEngine:
    def __init__(
        self,
        inner: Engine,
        *,
        fail_at: int | None = None,
        mode: Literal["before", "after"] = "before",
        retry_backoff: float | None = 0.01,
    ) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.mode = mode
        self.retry_backoff = retry_backoff
        self.armed = False
        """Writes count (and fail) only once :meth:`arm` is called: boot is not the workload."""
        self.writes: list[str] = []
        """Every write since :meth:`arm`, in order: ``"<op> <where>"``."""
        self.failed: str | None = None
        """The write that was failed, once it has been."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def arm(
        self, *, fail_at: int | None = None, mode: Literal["before", "after"] = "before"
    ) -> None:
        """Count writes from now (again from 1), failing the ``fail_at``-th."""
        self.armed = True
        self.fail_at, self.mode = fail_at, mode
        self.writes, self.failed = [], None

    async def _write(self, label: str, write: Callable[[], Awaitable[T]]) -> T:
        if not self.armed:
            return await write()
        self.writes.append(label)
        if len(self.writes) != self.fail_at:
            return await write()
        self.failed = f"write {self.fail_at} ({label})"
        if self.mode == "after":
            await write()
        raise InjectedFault(f"injected fault {self.mode} {self.failed}")

    async def configure_queue(self, queue: str, config: QueueConfig) -> None:
        if self.retry_backoff is not None:
            config = dataclasses.replace(
                config, backoff_initial=self.retry_backoff, backoff_max=self.retry_backoff
            )
        await self.inner.configure_queue(queue, config)

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        return await self._write(
            f"set_state {scope}/{key}",
            lambda: self.inner.set_state(scope, key, value, expected_revision=expected_revision),
        )

    async def update_state(self, scope: str, key: str, ops: list[UpdateOp]) -> StateEntry:
        return await self._write(
            f"update_state {scope}/{key}", lambda: self.inner.update_state(scope, key, ops)
        )

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool:
        return await self._write(
            f"delete_state {scope}/{key}",
            lambda: self.inner.delete_state(scope, key, expected_revision=expected_revision),
        )

    async def append(self, stream: str, group_id: str, data: Any) -> int:
        return await self._write(
            f"append {stream}/{group_id}", lambda: self.inner.append(stream, group_id, data)
        )

    async def enqueue(
        self,
        function_id: str,
        payload: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> str:
        return await self._write(
            f"enqueue {options.get('queue', 'default')}/{function_id}",
            lambda: self.inner.enqueue(function_id, payload, **options),
        )
