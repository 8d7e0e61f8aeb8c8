"""The public face of the ``catalog`` worker: its functions, payload models and error codes.

Other workers (the provider kit, the orchestrator's budget guard) import only this module and
call the worker through its descriptors (``await MODELS_GET.call(bus, GetRequest(...))``).
Failures arrive as ``InvocationError`` whose ``remote_code`` is one of the ``*_ERROR`` codes
below, or ``invalid_request`` when a payload does not validate.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function

__all__ = [
    "CAPABILITIES",
    "INVALID_STATE_ERROR",
    "LOCAL_PROVIDERS",
    "MODELS_CHECK",
    "MODELS_GET",
    "MODELS_LIST",
    "MODELS_RECONCILE",
    "MODELS_SUPPORTS",
    "MODEL_NOT_FOUND_ERROR",
    "PROVIDER_NOT_FOUND_ERROR",
    "SCHEMA_VERSION",
    "Capabilities",
    "Capability",
    "CheckRequest",
    "CheckResponse",
    "GetRequest",
    "ListRequest",
    "ListResponse",
    "ModelId",
    "ModelInfo",
    "PartialCapabilities",
    "PartialPrices",
    "Prices",
    "ProviderName",
    "ReconcileEntry",
    "ReconcileRequest",
    "ReconcileResponse",
    "SupportsRequest",
    "SupportsResponse",
    "WireApi",
]

SCHEMA_VERSION = 1

MODEL_NOT_FOUND_ERROR = "model_not_found"
"""The provider is in the catalog but the model is not (the message lists close matches)."""
PROVIDER_NOT_FOUND_ERROR = "provider_not_found"
"""The provider is neither in the catalog nor an OpenAI-compatible local server."""
INVALID_STATE_ERROR = "invalid_catalog_state"
"""A reconciled list in engine state has a schema this worker does not read."""

LOCAL_PROVIDERS: tuple[str, ...] = ("ollama", "vllm", "lmstudio", "llamacpp")
"""OpenAI-compatible local servers: an unknown model gets a conservative default, not an error."""

WireApi = Literal["openai-chat", "anthropic-messages"]
Capability = Literal["tools", "vision", "thinking", "cache", "streaming", "structured_output"]
CAPABILITIES: tuple[Capability, ...] = (
    "tools",
    "vision",
    "thinking",
    "cache",
    "streaming",
    "structured_output",
)

ProviderName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_.-]{0,31}$")]
"""A lower-case letter, then letters, digits, ``_``, ``.`` or ``-``; at most 32 characters
(so a pasted API key is refused as a name rather than stored and logged as one)."""
ModelId = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class Capabilities(_Model):
    tools: bool
    vision: bool
    thinking: bool
    cache: bool
    streaming: bool
    structured_output: bool = False
    """The provider constrains the answer to a JSON schema (OpenAI ``response_format:
    json_schema``, Anthropic ``output_config.format``): a run with an output schema asks for it
    natively. Absent from a data file: ``false`` (the schema goes in the prompt instead)."""


class Prices(_Model):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write: float = Field(ge=0)


class ModelInfo(_Model):
    """One model as the catalog describes it (the reply of ``models::get``)."""

    schema_version: int = SCHEMA_VERSION
    provider: str
    model: str
    wire_api: WireApi
    context_window: int = Field(ge=1)
    max_output_tokens: int = Field(ge=1)
    capabilities: Capabilities
    prices: Prices = Field(description="USD per million tokens")
    known: bool = Field(
        description="false: the model is not in the catalog and these are conservative defaults"
    )


class GetRequest(_Model):
    provider: ProviderName
    model: ModelId


class CheckRequest(_Model):
    provider: ProviderName
    model: ModelId


class CheckResponse(_Model):
    """Whether ``provider`` serves ``model`` as far as the catalog can tell (never an error)."""

    schema_version: int = SCHEMA_VERSION
    provider: str
    model: str
    known: bool = Field(description="the catalog lists the model, by id or alias")
    authoritative: bool = Field(
        description="the catalog's list of this provider is complete, so a model it does not"
        " list does not exist there (OpenAI, Anthropic); false for local servers, providers"
        " with open-ended lists and providers the catalog does not know"
    )
    suggestions: list[str] = Field(
        default_factory=list,
        description="the closest listed names, best first (empty when the model is known)",
    )


class ListRequest(_Model):
    provider: ProviderName | None = None
    capability: Capability | None = None


class ListResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    models: list[ModelInfo]
    prices_as_of: str = Field(description="the date the shipped prices were collected")


class SupportsRequest(_Model):
    provider: ProviderName
    model: ModelId
    capability: Capability


class SupportsResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    supported: bool


class PartialCapabilities(_Model):
    tools: bool | None = None
    vision: bool | None = None
    thinking: bool | None = None
    cache: bool | None = None
    streaming: bool | None = None
    structured_output: bool | None = None


class PartialPrices(_Model):
    input: float | None = Field(default=None, ge=0)
    output: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class ReconcileEntry(_Model):
    """A model as a live catalog knows it; what it leaves out is filled in (see the docs)."""

    model: ModelId
    aliases: list[ModelId] = Field(default_factory=list)
    wire_api: WireApi | None = None
    context_window: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    capabilities: PartialCapabilities | None = None
    prices: PartialPrices | None = None


class ReconcileRequest(_Model):
    provider: ProviderName
    models: list[ReconcileEntry] = Field(max_length=10_000)


class ReconcileResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    provider: str
    models: list[ModelInfo]


MODELS_LIST: Function[ListRequest, ListResponse] = Function(
    "models::list",
    ListRequest,
    ListResponse,
    description="Models in the catalog, of one provider or all, optionally with a capability.",
)
MODELS_GET: Function[GetRequest, ModelInfo] = Function(
    "models::get",
    GetRequest,
    ModelInfo,
    description="A model's wire API, context window, output limit, capabilities and prices "
    "(USD per million tokens); unknown local models get a conservative default.",
    hop=True,
)
MODELS_CHECK: Function[CheckRequest, CheckResponse] = Function(
    "models::check",
    CheckRequest,
    CheckResponse,
    description="Whether a provider serves a model as far as the catalog can tell: known,"
    " whether its list is authoritative, and the closest names (to refuse a typo before a run).",
    hop=True,
)
MODELS_SUPPORTS: Function[SupportsRequest, SupportsResponse] = Function(
    "models::supports",
    SupportsRequest,
    SupportsResponse,
    description="Whether a model has a capability (tools, vision, thinking, cache, streaming).",
    hop=True,
)
MODELS_RECONCILE: Function[ReconcileRequest, ReconcileResponse] = Function(
    "models::reconcile",
    ReconcileRequest,
    ReconcileResponse,
    description="Replace one provider's model list at run time (kept in engine state).",
)
