"""The catalog's data: the shipped ``models.yaml`` (or another file), and reconciled lists.

Both formats carry ``schema_version: 1``. A model's ``wire_api`` defaults to its provider's.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tackroom.contracts.catalog import (
    Capabilities,
    ModelId,
    Prices,
    ProviderName,
    WireApi,
)
from tackroom.runtime.typed import describe_validation_error
from tackroom.runtime.yamlfile import YamlProblem, load_yaml

__all__ = [
    "CatalogData",
    "CatalogDataError",
    "DataModel",
    "LocalDefaults",
    "ModelTemplate",
    "ProviderData",
    "ReconciledList",
    "StoredModel",
    "load_data",
    "shipped_data",
]


class CatalogDataError(ValueError):
    """A catalog data file that cannot be read or does not validate."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelTemplate(_Model):
    """Everything about a model but its name: the default for unknown local models."""

    wire_api: WireApi = "openai-chat"
    context_window: int = Field(ge=1)
    max_output_tokens: int = Field(ge=1)
    capabilities: Capabilities
    prices: Prices


class DataModel(_Model):
    """One model in the data file."""

    model: ModelId
    aliases: list[ModelId] = Field(default_factory=list)
    wire_api: WireApi | None = None
    context_window: int = Field(ge=1)
    max_output_tokens: int = Field(ge=1)
    capabilities: Capabilities
    prices: Prices


class StoredModel(_Model):
    """One model as served: the data file's entries, or a reconciled entry filled in."""

    model: str
    aliases: list[str] = Field(default_factory=list)
    wire_api: WireApi
    context_window: int = Field(ge=1)
    max_output_tokens: int = Field(ge=1)
    capabilities: Capabilities
    prices: Prices


def _check_unique_names(models: list[StoredModel] | list[DataModel], where: str) -> None:
    seen: set[str] = set()
    for entry in models:
        for name in (entry.model, *entry.aliases):
            if name in seen:
                raise ValueError(f"{where}: model name {name!r} appears twice")
            seen.add(name)


class ProviderData(_Model):
    wire_api: WireApi
    aliases: list[ProviderName] = Field(default_factory=list)
    authoritative: bool = Field(
        default=False,
        description="the list is complete: a model it does not name does not exist there",
    )
    models: list[DataModel]

    def stored(self) -> list[StoredModel]:
        return [
            StoredModel(
                model=entry.model,
                aliases=list(entry.aliases),
                wire_api=entry.wire_api or self.wire_api,
                context_window=entry.context_window,
                max_output_tokens=entry.max_output_tokens,
                capabilities=entry.capabilities,
                prices=entry.prices,
            )
            for entry in self.models
        ]


class LocalDefaults(_Model):
    providers: list[ProviderName]
    default: ModelTemplate


class CatalogData(_Model):
    """The data file: ``schema_version``, ``prices_as_of``, the local default, the providers."""

    schema_version: Literal[1]
    prices_as_of: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    currency: Literal["USD"] = "USD"
    local: LocalDefaults
    providers: dict[ProviderName, ProviderData]

    @model_validator(mode="after")
    def _names_are_unique(self) -> CatalogData:
        names = set(self.providers)
        for provider, data in self.providers.items():
            _check_unique_names(data.models, f"providers.{provider}")
            for alias in data.aliases:
                if alias in names:
                    raise ValueError(f"providers.{provider}: alias {alias!r} is taken")
                names.add(alias)
        return self


class ReconciledList(_Model):
    """What ``models::reconcile`` keeps in engine state (scope ``models``, key: the provider)."""

    schema_version: Literal[1] = 1
    provider: str
    reconciled_at: float
    models: list[StoredModel]

    @model_validator(mode="after")
    def _names_are_unique(self) -> ReconciledList:
        _check_unique_names(self.models, f"reconciled list of {self.provider}")
        return self


def load_data(path: Path) -> CatalogData:
    """Read and validate a catalog data file (YAML or JSON)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CatalogDataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _parse(data, str(path))


@functools.cache
def shipped_data() -> CatalogData:
    """The ``models.yaml`` shipped in this package, parsed once per process.

    Read by libyaml when PyYAML has it: ~5 ms, where the strict reader a person's file goes
    through takes ~50 ms of every boot. The file is ours, so its strictness (no duplicate key,
    bounded nesting) is a test's business: the test reads it strictly and checks both agree.
    """
    data = (resources.files(__package__) / "models.yaml").read_bytes()
    if not yaml.__with_libyaml__:
        return _parse(data, "models.yaml")
    return _validated(yaml.load(data, Loader=yaml.CSafeLoader), "models.yaml")


def _parse(text: str | bytes, name: str) -> CatalogData:
    try:
        _, raw = load_yaml(text)
    except YamlProblem as exc:
        raise CatalogDataError(f"{name}: {exc}") from None
    return _validated(raw, name)


def _validated(raw: object, name: str) -> CatalogData:
    try:
        return CatalogData.model_validate(raw)
    except ValidationError as exc:
        raise CatalogDataError(f"{name}: {describe_validation_error(exc)}") from None
