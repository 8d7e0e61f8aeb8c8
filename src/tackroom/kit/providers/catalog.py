"""What a provider worker asks of the model catalog (``MODELS_GET``), and the cost of a call.

When no catalog worker serves it (or it fails or is slow), a model gets
conservative defaults: no known limits, every capability assumed, and prices of zero, so the
cost reported with the usage is 0. Answers are cached per model for ``ttl`` seconds (a missing
catalog for ``miss_ttl``).

A catalog that answers that it does not know the provider or the model (a custom
OpenAI-compatible profile, a brand-new model) is an answer, not a failure: it is logged once per
model — a warning the first time, debug after — and cached like any answer. A profile with
``catalog: false`` never asks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from tackroom.contracts import catalog
from tackroom.contracts.catalog import (
    MODEL_NOT_FOUND_ERROR,
    MODELS_GET,
    PROVIDER_NOT_FOUND_ERROR,
    GetRequest,
)
from tackroom.contracts.messages import Usage
from tackroom.engine.errors import EngineError, FunctionNotFound, InvocationError
from tackroom.engine.protocol import Engine

__all__ = ["CatalogClient", "ModelInfo", "Prices", "priced"]

_log = logging.getLogger("tackroom.providers")


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    @property
    def known(self) -> bool:
        return any((self.input, self.output, self.cache_read, self.cache_write))


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A model as the catalog describes it; :meth:`unknown` when there is no catalog."""

    provider: str
    model: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: Mapping[str, bool] = field(default_factory=dict)
    prices: Prices = Prices()
    known: bool = False

    @classmethod
    def unknown(cls, provider: str, model: str) -> ModelInfo:
        return cls(provider=provider, model=model)

    def supports(self, capability: str) -> bool:
        """``True`` unless the catalog *knows* the model and says it lacks ``capability`` (the
        flags of a model the catalog does not know are guesses; the profile decides)."""
        return not self.known or self.capabilities.get(capability, True)

    @property
    def output_limit(self) -> int | None:
        """The catalog's output limit for a model it knows (``None``: unknown)."""
        return self.max_output_tokens if self.known else None

    @classmethod
    def from_catalog(cls, provider: str, model: str, entry: catalog.ModelInfo) -> ModelInfo:
        """The catalog's answer about ``provider``'s ``model``, as a provider uses it."""
        prices = entry.prices
        return cls(
            provider=provider,
            model=model,
            context_window=entry.context_window,
            max_output_tokens=entry.max_output_tokens,
            capabilities=entry.capabilities.model_dump(),
            prices=Prices(
                input=prices.input,
                output=prices.output,
                cache_read=prices.cache_read,
                cache_write=prices.cache_write,
            ),
            known=entry.known,
        )


def priced(usage: Usage, prices: Prices) -> Usage:
    """``usage`` with ``cost_usd`` from ``prices`` (cache reads and writes priced apart)."""
    if not prices.known:
        return usage
    cost = (
        usage.input_tokens * prices.input
        + usage.output_tokens * prices.output
        + usage.cache_read_tokens * prices.cache_read
        + usage.cache_write_tokens * prices.cache_write
    ) / 1_000_000
    return usage.model_copy(update={"cost_usd": round(cost, 10)})


_NOT_IN_CATALOG = (MODEL_NOT_FOUND_ERROR, PROVIDER_NOT_FOUND_ERROR)


class CatalogClient:
    """Cached ``models::get`` lookups for one provider name (``enabled=False``: none at all)."""

    def __init__(
        self,
        engine: Engine,
        provider: str,
        *,
        clock: Callable[[], float],
        timeout: float = 2.0,
        ttl: float = 300.0,
        miss_ttl: float = 30.0,
        enabled: bool = True,
        profile: str | None = None,
    ) -> None:
        self._engine = engine
        self._provider = provider
        self._profile = profile or provider
        self._clock = clock
        self._timeout = timeout
        self._ttl = ttl
        self._miss_ttl = miss_ttl
        self._enabled = enabled
        self._cache: dict[str, tuple[float, ModelInfo]] = {}
        self._noted: set[str] = set()

    async def model(self, model: str) -> ModelInfo:
        if not self._enabled:
            return ModelInfo.unknown(self._provider, model)
        now = self._clock()
        hit = self._cache.get(model)
        if hit is not None and now < hit[0]:
            return hit[1]
        try:
            request = GetRequest(provider=self._provider, model=model)
            reply = await MODELS_GET.call(self._engine, request, timeout=self._timeout)
        except FunctionNotFound:
            info, ttl = ModelInfo.unknown(self._provider, model), self._miss_ttl
        except InvocationError as exc:
            info = ModelInfo.unknown(self._provider, model)
            if exc.remote_code in _NOT_IN_CATALOG:
                self._note_not_in_catalog(model, exc.message)
                ttl = self._ttl  # the catalog's answer, not an outage
            else:
                _log.warning("%s %s/%s failed: %s", MODELS_GET.id, self._provider, model, exc)
                ttl = self._miss_ttl
        except (EngineError, ValidationError) as exc:
            _log.warning("%s %s/%s failed: %s", MODELS_GET.id, self._provider, model, exc)
            info, ttl = ModelInfo.unknown(self._provider, model), self._miss_ttl
        else:
            info, ttl = ModelInfo.from_catalog(self._provider, model, reply), self._ttl
        self._cache[model] = (now + ttl, info)
        return info

    def _note_not_in_catalog(self, model: str, why: str) -> None:
        """Say it once per model: a warning the first time, debug after (it does not change)."""
        level = logging.DEBUG if model in self._noted else logging.WARNING
        self._noted.add(model)
        _log.log(
            level,
            "provider %s, model %s: %s; its usage is priced at 0 and no limits are known"
            " (set catalog_provider to a provider the catalog lists, or catalog: false in the"
            " profile to stop asking)",
            self._profile,
            model,
            why,
        )
