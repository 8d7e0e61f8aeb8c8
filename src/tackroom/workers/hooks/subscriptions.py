"""Subscriptions on engine state: one value per topic, rewritten by compare-and-set.

A topic whose last subscriber leaves is deleted (also by compare-and-set), so the scope lists
exactly the topics somebody listens to. Two processes subscribing at once both land: the loser
of a race re-reads and retries, up to ``max_attempts`` times (then ``contention``).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Protocol

from tackroom.contracts.hooks import (
    CONTENTION_ERROR,
    SUBSCRIPTIONS_SCOPE,
    Subscriber,
    TopicSubscriptions,
)
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import StateEntry

__all__ = ["StateBackend", "SubscriptionStore", "ordered"]


class StateBackend(Protocol):
    """The engine's state methods the store uses (an ``Engine`` is one)."""

    async def get_state(self, scope: str, key: str) -> StateEntry | None: ...

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry: ...

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool: ...

    async def list_state(self, scope: str, *, prefix: str = "") -> list[StateEntry]: ...


def ordered(subscribers: list[Subscriber]) -> list[Subscriber]:
    """Call order: lower priority first, ties by function id."""
    return sorted(subscribers, key=lambda s: (s.priority, s.function_id))


async def _backoff(attempt: int) -> None:
    await asyncio.sleep(random.uniform(0, min(0.05, 0.0005 * 2**attempt)) if attempt else 0)


class SubscriptionStore:
    def __init__(self, backend: StateBackend, *, max_attempts: int = 64) -> None:
        self._backend = backend
        self._max_attempts = max_attempts

    async def get(self, topic: str) -> TopicSubscriptions:
        entry = await self._backend.get_state(SUBSCRIPTIONS_SCOPE.name, topic)
        return TopicSubscriptions() if entry is None else _parse(entry)

    async def all(self) -> dict[str, TopicSubscriptions]:
        entries = await self._backend.list_state(SUBSCRIPTIONS_SCOPE.name)
        return {entry.key: _parse(entry) for entry in entries}

    async def subscribe(self, topic: str, function_id: str, priority: int) -> TopicSubscriptions:
        """Add ``function_id`` (or move it to ``priority``); idempotent."""
        for attempt in range(self._max_attempts):
            await _backoff(attempt)
            entry = await self._backend.get_state(SUBSCRIPTIONS_SCOPE.name, topic)
            current = TopicSubscriptions() if entry is None else _parse(entry)
            others = [s for s in current.subscribers if s.function_id != function_id]
            wanted = ordered([*others, Subscriber(function_id=function_id, priority=priority)])
            if wanted == current.subscribers and entry is not None:
                return current
            updated = TopicSubscriptions(subscribers=wanted)
            try:
                await self._backend.set_state(
                    SUBSCRIPTIONS_SCOPE.name,
                    topic,
                    updated.model_dump(mode="json"),
                    expected_revision=0 if entry is None else entry.revision,
                )
            except RevisionConflict:
                continue
            return updated
        raise _contention(topic)

    async def unsubscribe(self, topic: str, function_id: str) -> tuple[bool, TopicSubscriptions]:
        """Remove ``function_id``; ``(removed, what is left)``. The last one out deletes the key."""
        for attempt in range(self._max_attempts):
            await _backoff(attempt)
            entry = await self._backend.get_state(SUBSCRIPTIONS_SCOPE.name, topic)
            if entry is None:
                return False, TopicSubscriptions()
            current = _parse(entry)
            left = [s for s in current.subscribers if s.function_id != function_id]
            if len(left) == len(current.subscribers):
                return False, current
            updated = TopicSubscriptions(subscribers=left)
            try:
                if left:
                    await self._backend.set_state(
                        SUBSCRIPTIONS_SCOPE.name,
                        topic,
                        updated.model_dump(mode="json"),
                        expected_revision=entry.revision,
                    )
                elif not await self._backend.delete_state(
                    SUBSCRIPTIONS_SCOPE.name, topic, expected_revision=entry.revision
                ):
                    continue
            except RevisionConflict:
                continue
            return True, updated
        raise _contention(topic)


def _parse(entry: StateEntry) -> TopicSubscriptions:
    return TopicSubscriptions.model_validate(entry.value)


def _contention(topic: str) -> FunctionError:
    return FunctionError(CONTENTION_ERROR, f"subscriptions of {topic!r} kept changing; retry")
