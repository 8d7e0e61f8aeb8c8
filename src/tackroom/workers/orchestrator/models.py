"""What the catalog says of the run's model, asked once per process and model."""

from __future__ import annotations

from pydantic import ValidationError

from tackroom.contracts.catalog import MODELS_GET, GetRequest, ModelInfo
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine

__all__ = ["ModelInfoCache"]


class ModelInfoCache:
    """``models::get`` answers by ``(provider, model)``; ``None`` when no catalog knows it (a
    scripted provider, a catalog not served): callers then go without window or prices."""

    def __init__(self, engine: Engine, *, timeout: float = 5.0) -> None:
        self._engine = engine
        self._timeout = timeout
        self._known: dict[tuple[str, str], ModelInfo | None] = {}

    async def get(self, provider: str, model: str) -> ModelInfo | None:
        key = (provider, model)
        if key not in self._known:
            try:
                request = GetRequest(provider=provider, model=model)
                self._known[key] = await MODELS_GET.call(
                    self._engine, request, timeout=self._timeout
                )
            except (EngineError, ValidationError):
                self._known[key] = None
        return self._known[key]
