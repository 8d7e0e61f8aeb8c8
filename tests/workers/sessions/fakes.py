"""State backends wrapping a real engine: one that interleaves callers, one that counts writes,
one that dies at a chosen write."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from tackroom.engine import Engine, StateEntry, UpdateOp
from tackroom.engine.jsonvalue import dumps

__all__ = ["AtomicBackend", "Crash", "WrappedBackend", "Write"]


class Crash(Exception):
    """The process 'died' at this write: nothing after it runs."""


@dataclass(frozen=True, slots=True)
class Write:
    op: str
    scope: str
    key: str
    stored_bytes: int


class WrappedBackend:
    """Delegates to ``engine``; records operations; optionally yields and crashes.

    ``interleave``: yield to the event loop a random number of times (seeded) around every op,
    as a network round trip would, so concurrent callers really interleave.
    ``crash_when``: a predicate on ``(op, scope, key)``; the first matching write raises
    :class:`Crash` instead of writing.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        interleave: bool = False,
        seed: int = 7,
        crash_when: Callable[[str, str, str], bool] | None = None,
    ) -> None:
        self.engine = engine
        self.interleave = interleave
        self.crash_when = crash_when
        self.ops: list[tuple[str, str, str]] = []
        self.writes: list[Write] = []
        self._rng = random.Random(seed)

    async def _pause(self) -> None:
        if self.interleave:
            for _ in range(self._rng.randint(0, 3)):
                await asyncio.sleep(0)

    def _enter(self, op: str, scope: str, key: str) -> None:
        self.ops.append((op, scope, key))
        is_write = op in ("set", "update", "delete")
        if is_write and self.crash_when is not None and self.crash_when(op, scope, key):
            self.crash_when = None
            raise Crash(f"{op} {scope}/{key}")

    async def get_state(self, scope: str, key: str) -> StateEntry | None:
        await self._pause()
        self._enter("get", scope, key)
        return await self.engine.get_state(scope, key)

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        await self._pause()
        self._enter("set", scope, key)
        entry = await self.engine.set_state(scope, key, value, expected_revision=expected_revision)
        self.writes.append(Write("set", scope, key, len(dumps(entry.value).encode())))
        await self._pause()
        return entry

    async def update_state(self, scope: str, key: str, ops: list[UpdateOp]) -> StateEntry:
        await self._pause()
        self._enter("update", scope, key)
        entry = await self.engine.update_state(scope, key, ops)
        self.writes.append(Write("update", scope, key, len(dumps(entry.value).encode())))
        await self._pause()
        return entry

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool:
        await self._pause()
        self._enter("delete", scope, key)
        deleted = await self.engine.delete_state(scope, key, expected_revision=expected_revision)
        await self._pause()
        return deleted

    async def list_state(self, scope: str, *, prefix: str = "") -> list[StateEntry]:
        await self._pause()
        self._enter("list", scope, prefix)
        return await self.engine.list_state(scope, prefix=prefix)

    atomic_transactions = False
    """Each write lands at once, as on a backend without atomic units of work (NATS)."""

    def transaction(self) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def reset(self) -> None:
        self.ops.clear()
        self.writes.clear()


class AtomicBackend(WrappedBackend):
    """A :class:`WrappedBackend` that offers its engine's units of work, as an engine with
    ``atomic_transactions`` does (the store then commits metadata and entries together)."""

    atomic_transactions = True

    def transaction(self) -> AbstractAsyncContextManager[None]:
        return self.engine.transaction()
