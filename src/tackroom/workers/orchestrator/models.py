"""What the catalog says of the run's model, asked once per process and model."""

from __future__ import annotations

from pydantic import ValidationError

from tackroom.contracts.catalog import (
    MODELS_CHECK,
    MODELS_GET,
    CheckRequest,
    GetRequest,
    ModelInfo,
)
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine

__all__ = ["ModelInfoCache"]


class ModelInfoCache:
    """``models::get`` answers by ``(provider, model)``; ``None`` when the catalog does not list
    the model (a scripted or function model, a custom server) or none is served: callers then go
    without window or prices. ``models::check`` asks first, so a model the catalog does not list
    costs no failed call (and no error span in a trace)."""

    def __init__(self, engine: Engine, *, timeout: float = 5.0) -> None:
        self._engine = engine
        self._timeout = timeout
        self._known: dict[tuple[str, str], ModelInfo | None] = {}

    async def get(self, provider: str, model: str) -> ModelInfo | None:
        key = (provider, model)
        if key not in self._known:
            self._known[key] = await self._ask(provider, model)
        return self._known[key]

    async def _ask(self, provider: str, model: str) -> ModelInfo | None:
        try:
            check = await MODELS_CHECK.call(
                self._engine, CheckRequest(provider=provider, model=model), timeout=self._timeout
            )
            if not check.known:
                return None
            request = GetRequest(provider=provider, model=model)
            return await MODELS_GET.call(self._engine, request, timeout=self._timeout)
        except (EngineError, ValidationError):
            return None
