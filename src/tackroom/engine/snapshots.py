"""The snapshot providers one process offers, by ``(stream, group)`` (both backends keep one)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from tackroom.engine.jsonvalue import to_json_value

__all__ = ["SnapshotOffers"]

_log = logging.getLogger("tackroom.engine")

Key = tuple[str, str]


class SnapshotOffers:
    def __init__(self) -> None:
        self._offers: dict[Key, list[Callable[[], Any]]] = {}

    def offered(self, key: Key) -> bool:
        return key in self._offers

    @contextlib.contextmanager
    def offer(self, key: Key, provider: Callable[[], Any]) -> Iterator[None]:
        self._offers.setdefault(key, []).append(provider)
        try:
            yield
        finally:
            providers = self._offers.get(key, [])
            if provider in providers:
                providers.remove(provider)
            if not providers:
                self._offers.pop(key, None)

    def values(self, key: Key) -> list[Any]:
        """Each provider's value now, as a JSON copy; a provider that fails is left out (a
        reader then misses one snapshot, never its stream)."""
        values: list[Any] = []
        for provider in list(self._offers.get(key, ())):
            try:
                values.append(to_json_value(provider(), what="snapshot"))
            except Exception:
                _log.warning("a snapshot provider of %s/%s failed", *key, exc_info=True)
        return values
