"""Subscriptions on engine state: one value per topic, rewritten by compare-and-set.

A topic whose last subscriber leaves is deleted (also by compare-and-set), so the scope lists
exactly the topics somebody listens to. Two processes subscribing at once both land: the loser
of a race re-reads and retries, up to ``max_attempts`` times (then ``contention``).
"""

from __future__ import annotations

from typing import Any

from tackroom.contracts.hooks import (
    SUBSCRIPTIONS_SCOPE,
    Subscriber,
    TopicSubscriptions,
)
from tackroom.engine.protocol import StateBackend
from tackroom.kit.cas import DELETE, UNCHANGED, mutate

__all__ = ["SubscriptionStore", "ordered"]


def ordered(subscribers: list[Subscriber]) -> list[Subscriber]:
    """Call order: lower priority first, ties by function id."""
    return sorted(subscribers, key=lambda s: (s.priority, s.function_id))


class SubscriptionStore:
    def __init__(self, backend: StateBackend, *, max_attempts: int = 64) -> None:
        self._backend = backend
        self._max_attempts = max_attempts

    async def get(self, topic: str) -> TopicSubscriptions:
        entry = await self._backend.get_state(SUBSCRIPTIONS_SCOPE.name, topic)
        return TopicSubscriptions() if entry is None else _parse(entry.value)

    async def all(self) -> dict[str, TopicSubscriptions]:
        entries = await self._backend.list_state(SUBSCRIPTIONS_SCOPE.name)
        return {entry.key: _parse(entry.value) for entry in entries}

    async def subscribe(self, topic: str, function_id: str, priority: int) -> TopicSubscriptions:
        """Add ``function_id`` (or move it to ``priority``); idempotent."""

        def change(value: Any) -> tuple[Any, TopicSubscriptions]:
            current = TopicSubscriptions() if value is None else _parse(value)
            others = [s for s in current.subscribers if s.function_id != function_id]
            wanted = ordered([*others, Subscriber(function_id=function_id, priority=priority)])
            if wanted == current.subscribers and value is not None:
                return UNCHANGED, current
            updated = TopicSubscriptions(subscribers=wanted)
            return updated.model_dump(mode="json"), updated

        return await mutate(
            self._backend, SUBSCRIPTIONS_SCOPE.name, topic, change, attempts=self._max_attempts
        )

    async def unsubscribe(self, topic: str, function_id: str) -> tuple[bool, TopicSubscriptions]:
        """Remove ``function_id``; ``(removed, what is left)``. The last one out deletes the key."""

        def change(value: Any) -> tuple[Any, tuple[bool, TopicSubscriptions]]:
            if value is None:
                return UNCHANGED, (False, TopicSubscriptions())
            current = _parse(value)
            left = [s for s in current.subscribers if s.function_id != function_id]
            if len(left) == len(current.subscribers):
                return UNCHANGED, (False, current)
            updated = TopicSubscriptions(subscribers=left)
            return (updated.model_dump(mode="json") if left else DELETE), (True, updated)

        return await mutate(
            self._backend, SUBSCRIPTIONS_SCOPE.name, topic, change, attempts=self._max_attempts
        )


def _parse(value: Any) -> TopicSubscriptions:
    return TopicSubscriptions.model_validate(value)
