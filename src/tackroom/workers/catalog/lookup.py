"""Answering catalog questions from the data file and the reconciled lists (no I/O here).

A provider's **effective list** is its reconciled list when one is stored, else the data file's.
A model is found by id, then by alias. An unknown model of a local OpenAI-compatible server gets
the data file's conservative default (``known: false``); elsewhere it is an error naming close
matches. :meth:`Catalog.check` answers, without an error, whether a provider serves a model as
far as the catalog can tell — for a provider whose list is complete (``authoritative``), an
unlisted model is a typo.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence

from tackroom.contracts.catalog import (
    MODEL_NOT_FOUND_ERROR,
    PROVIDER_NOT_FOUND_ERROR,
    Capabilities,
    CheckResponse,
    ModelInfo,
    Prices,
    ReconcileEntry,
)
from tackroom.engine.errors import FunctionError
from tackroom.workers.catalog.data import CatalogData, ModelTemplate, StoredModel

__all__ = ["Catalog", "closest", "find_model"]

_SNAPSHOT = re.compile(r"^(.+)-(?:\d{4}-\d{2}-\d{2}|\d{8})$")
"""A dated snapshot (``gpt-4o-2024-05-13``, ``claude-sonnet-4-5-20250929``) and its base."""


def find_model(models: Sequence[StoredModel], name: str) -> StoredModel | None:
    """The entry whose id is ``name``, else the one with ``name`` among its aliases."""
    for entry in models:
        if entry.model == name:
            return entry
    for entry in models:
        if name in entry.aliases:
            return entry
    return None


def closest(name: str, candidates: Iterable[str], *, n: int = 3) -> list[str]:
    """The names most like ``name``, best first: at most ``n``, and only those nearly as close as
    the best (``gpt-5-mni`` gives ``gpt-5-mini``, not every ``*-mini``)."""
    scored = sorted(
        (
            (difflib.SequenceMatcher(None, name, candidate).ratio(), candidate)
            for candidate in set(candidates)
        ),
        key=lambda pair: (-pair[0], pair[1]),
    )
    scored = [pair for pair in scored if pair[0] >= 0.6]
    if not scored:
        return []
    best = scored[0][0]
    return [candidate for ratio, candidate in scored[:n] if ratio >= best - 0.05]


def _hint(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(close)}?" if close else ""


class Catalog:
    """The data file plus the rule for local servers; reconciled lists are passed in per call."""

    def __init__(self, data: CatalogData, *, local_providers: Sequence[str] | None = None) -> None:
        self.data = data
        self.local_providers = frozenset(
            data.local.providers if local_providers is None else local_providers
        )
        self._aliases = {
            alias: name for name, provider in data.providers.items() for alias in provider.aliases
        }
        self._static = {name: provider.stored() for name, provider in data.providers.items()}

    # -- providers -----------------------------------------------------------------------------
    def canonical(self, provider: str) -> str:
        """The provider's own name when ``provider`` is an alias (``kimi`` → ``moonshot``)."""
        return self._aliases.get(provider, provider)

    def static(self, provider: str) -> list[StoredModel] | None:
        """The data file's list for a canonical provider name (``None``: not in the file)."""
        return self._static.get(provider)

    def providers(self, reconciled: Iterable[str] = ()) -> list[str]:
        """Every canonical provider name: the data file's, the reconciled ones, the local ones."""
        return sorted({*self._static, *reconciled, *self.local_providers})

    def is_local(self, provider: str) -> bool:
        return self.canonical(provider) in self.local_providers

    def is_authoritative(self, provider: str) -> bool:
        """The data file marks the provider's list complete (and it is no local server)."""
        data = self.data.providers.get(self.canonical(provider))
        return data is not None and data.authoritative and not self.is_local(provider)

    def effective(
        self, provider: str, reconciled: Mapping[str, list[StoredModel]]
    ) -> list[StoredModel] | None:
        canonical = self.canonical(provider)
        if canonical in reconciled:
            return reconciled[canonical]
        return self._static.get(canonical)

    def unknown_provider(
        self, provider: str, reconciled: Mapping[str, list[StoredModel]]
    ) -> FunctionError:
        hint = _hint(provider, [*self.providers(reconciled), *self._aliases])
        return FunctionError(
            PROVIDER_NOT_FOUND_ERROR,
            f"no provider {provider!r} in the model catalog{hint} (local OpenAI-compatible "
            f"servers: {', '.join(sorted(self.local_providers))})",
        )

    # -- models --------------------------------------------------------------------------------
    def resolve(
        self, provider: str, model: str, reconciled: Mapping[str, list[StoredModel]]
    ) -> ModelInfo:
        """What ``models::get`` answers; ``provider`` and ``model`` are echoed as asked."""
        models = self.effective(provider, reconciled)
        found = find_model(models, model) if models is not None else None
        if found is not None:
            return self.info(provider, found, model=model)
        if self.is_local(provider):
            return self.default_info(provider, model)
        if models is None:
            raise self.unknown_provider(provider, reconciled)
        names = [name for entry in models for name in (entry.model, *entry.aliases)]
        raise FunctionError(
            MODEL_NOT_FOUND_ERROR,
            f"provider {provider!r} has no model {model!r} in the catalog{_hint(model, names)}",
        )

    def check(
        self, provider: str, model: str, reconciled: Mapping[str, list[StoredModel]]
    ) -> CheckResponse:
        """What ``models::check`` answers; ``provider`` and ``model`` are echoed as asked."""
        models = self.effective(provider, reconciled) or []
        authoritative = bool(models) and self.is_authoritative(provider)
        if find_model(models, model) is not None:
            return CheckResponse(
                provider=provider, model=model, known=True, authoritative=authoritative
            )
        names = [name for entry in models for name in (entry.model, *entry.aliases)]
        snapshot = _SNAPSHOT.match(model)
        if snapshot is not None and find_model(models, snapshot.group(1)) is not None:
            # a dated snapshot of a listed model: it may well exist, the list cannot tell
            authoritative = False
        return CheckResponse(
            provider=provider,
            model=model,
            known=False,
            authoritative=authoritative,
            suggestions=closest(model, names),
        )

    def info(self, provider: str, entry: StoredModel, *, model: str | None = None) -> ModelInfo:
        return _described(provider, model or entry.model, entry, known=True)

    def default_info(self, provider: str, model: str) -> ModelInfo:
        return _described(provider, model, self.data.local.default, known=False)

    def fill(self, provider: str, entry: ReconcileEntry, base: StoredModel | None) -> StoredModel:
        """A complete model from a reconcile entry: its fields over ``base`` (the model as known
        before, by id or alias) or, for a new model, over the local default."""
        template = self.data.local.default
        static = self._static.get(provider)
        wire_api = (
            base.wire_api
            if base is not None
            else self.data.providers[provider].wire_api
            if static is not None
            else template.wire_api
        )
        capabilities = (base or template).capabilities.model_dump()
        if entry.capabilities is not None:
            capabilities.update(entry.capabilities.model_dump(exclude_none=True))
        prices = (base or template).prices.model_dump()
        if entry.prices is not None:
            prices.update(entry.prices.model_dump(exclude_none=True))
        return StoredModel(
            model=entry.model,
            aliases=list(entry.aliases),
            wire_api=entry.wire_api or wire_api,
            context_window=entry.context_window or (base or template).context_window,
            max_output_tokens=entry.max_output_tokens or (base or template).max_output_tokens,
            capabilities=Capabilities.model_validate(capabilities),
            prices=Prices.model_validate(prices),
        )


def _described(
    provider: str, model: str, shape: StoredModel | ModelTemplate, *, known: bool
) -> ModelInfo:
    return ModelInfo(
        provider=provider,
        model=model,
        wire_api=shape.wire_api,
        context_window=shape.context_window,
        max_output_tokens=shape.max_output_tokens,
        capabilities=shape.capabilities,
        prices=shape.prices,
        known=known,
    )
