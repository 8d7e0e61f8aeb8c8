"""The ``catalog`` worker: ``models::list``, ``get``, ``check``, ``supports`` and ``reconcile``.

```yaml
worker_config:
  catalog:
    data_path: null          # another models.yaml (default: the one shipped in this package)
    local_providers: null    # override the data file's list of OpenAI-compatible local servers
    state_scope: models      # where reconciled lists live in engine state
```

The data file is read once, at start (a bad file fails the start). Reconciled lists live in
engine state, one key per provider, so every process serving the catalog sees the same lists;
each call reads only the keys it needs.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pydantic import Field, ValidationError

from tackroom.contracts.catalog import (
    INVALID_STATE_ERROR,
    MODELS_CHECK,
    MODELS_GET,
    MODELS_LIST,
    MODELS_RECONCILE,
    MODELS_SUPPORTS,
    CheckRequest,
    CheckResponse,
    GetRequest,
    ListRequest,
    ListResponse,
    ModelInfo,
    ProviderName,
    ReconcileRequest,
    ReconcileResponse,
    SupportsRequest,
    SupportsResponse,
)
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import Engine
from tackroom.runtime.typed import describe_validation_error
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.catalog.data import (
    CatalogDataError,
    ReconciledList,
    StoredModel,
    load_data,
    shipped_data,
)
from tackroom.workers.catalog.lookup import Catalog, find_model

__all__ = ["WORKER", "CatalogConfig", "CatalogService"]

_log = logging.getLogger("tackroom.catalog")


class CatalogConfig(WorkerConfig):
    data_path: Path | None = Field(
        default=None, description="a catalog data file to use instead of the shipped one"
    )
    local_providers: list[ProviderName] | None = Field(
        default=None, description="OpenAI-compatible local servers (default: the data file's)"
    )
    state_scope: str = Field(default="models", min_length=1)


class CatalogService:
    """The handlers, over one :class:`Catalog` and the engine's state."""

    def __init__(self, engine: Engine, catalog: Catalog, *, scope: str) -> None:
        self._engine = engine
        self.catalog = catalog
        self._scope = scope

    async def _reconciled(self, provider: str | None = None) -> dict[str, list[StoredModel]]:
        """Reconciled lists by canonical provider: all of them, or just ``provider``'s."""
        if provider is not None:
            canonical = self.catalog.canonical(provider)
            entry = await self._engine.get_state(self._scope, canonical)
            entries = [] if entry is None else [(canonical, entry.value)]
        else:
            entries = [(e.key, e.value) for e in await self._engine.list_state(self._scope)]
        lists: dict[str, list[StoredModel]] = {}
        for key, value in entries:
            try:
                lists[key] = ReconciledList.model_validate(value).models
            except ValidationError as exc:
                raise FunctionError(
                    INVALID_STATE_ERROR,
                    f"the reconciled model list of {key!r} (state scope {self._scope!r}) is not "
                    f"schema_version 1: {describe_validation_error(exc)}",
                ) from None
        return lists

    async def get(self, request: GetRequest) -> ModelInfo:
        reconciled = await self._reconciled(request.provider)
        return self.catalog.resolve(request.provider, request.model, reconciled)

    async def check(self, request: CheckRequest) -> CheckResponse:
        reconciled = await self._reconciled(request.provider)
        return self.catalog.check(request.provider, request.model, reconciled)

    async def supports(self, request: SupportsRequest) -> SupportsResponse:
        info = await self.get(GetRequest(provider=request.provider, model=request.model))
        return SupportsResponse(supported=getattr(info.capabilities, request.capability))

    async def list(self, request: ListRequest) -> ListResponse:
        reconciled = await self._reconciled(request.provider)
        if request.provider is not None:
            canonical = self.catalog.canonical(request.provider)
            models = self.catalog.effective(request.provider, reconciled)
            if models is None and not self.catalog.is_local(request.provider):
                raise self.catalog.unknown_provider(request.provider, reconciled)
            per_provider = [(canonical, models or [])]
        else:
            per_provider = [
                (name, self.catalog.effective(name, reconciled) or [])
                for name in self.catalog.providers(reconciled)
            ]
        infos = [
            self.catalog.info(name, entry)
            for name, models in per_provider
            for entry in models
            if request.capability is None or getattr(entry.capabilities, request.capability)
        ]
        return ListResponse(models=infos, prices_as_of=self.catalog.data.prices_as_of)

    async def reconcile(self, request: ReconcileRequest) -> ReconcileResponse:
        canonical = self.catalog.canonical(request.provider)
        current = self.catalog.effective(canonical, await self._reconciled(canonical)) or []
        static = self.catalog.static(canonical) or []
        models = [
            self.catalog.fill(
                canonical,
                entry,
                find_model(current, entry.model) or find_model(static, entry.model),
            )
            for entry in request.models
        ]
        try:
            record = ReconciledList(provider=canonical, reconciled_at=time.time(), models=models)
        except ValidationError as exc:
            raise FunctionError("invalid_request", describe_validation_error(exc)) from None
        await self._engine.set_state(self._scope, canonical, record.model_dump(mode="json"))
        _log.info("catalog: reconciled %d models of %s", len(models), canonical)
        return ReconcileResponse(
            provider=canonical, models=[self.catalog.info(canonical, m) for m in models]
        )


async def _start(ctx: WorkerContext[CatalogConfig]) -> None:
    config = ctx.config
    try:
        data = load_data(config.data_path.expanduser()) if config.data_path else shipped_data()
    except CatalogDataError as exc:
        raise RuntimeError(f"catalog: {exc}") from None
    catalog = Catalog(data, local_providers=config.local_providers)
    service = CatalogService(ctx.engine, catalog, scope=config.state_scope)
    await ctx.serve(MODELS_LIST, service.list)
    await ctx.serve(MODELS_GET, service.get)
    await ctx.serve(MODELS_CHECK, service.check)
    await ctx.serve(MODELS_SUPPORTS, service.supports)
    await ctx.serve(MODELS_RECONCILE, service.reconcile)


WORKER = WorkerSpec(
    name="catalog",
    description="Model capabilities and prices: models::list, get, check, supports, reconcile.",
    config_model=CatalogConfig,
    start=_start,
)
