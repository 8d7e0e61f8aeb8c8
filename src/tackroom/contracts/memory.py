"""The ``memory`` worker's public face: long-term memory as tools (ids, models, traits, errors).

A memory item is a piece of text with metadata, kept in a **scope** — ``user``, ``agent`` or
``workspace``, each with an id — and found again by full-text search. Every request may name its
scope; without one the worker's configured default applies (``workspace:default``), so a model
that never names a scope shares one memory across sessions. Ids are unique within a scope; saving
under an existing id replaces that item (``created_at`` is kept). Search scores are higher for
better matches, normalised by each backend to ``(0, 1)``; hits come best first.

The default worker is ``memory`` (SQLite FTS5, BM25); ``memory-postgres`` serves the same
functions on PostgreSQL full-text search. Both pass :mod:`tackroom.testing.contracts.memory`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, StrictFloat, StrictInt

from tackroom.contracts._base import Strict
from tackroom.contracts._base import Strict as _Request
from tackroom.contracts.bus import Tool

__all__ = [
    "INVALID_REQUEST",
    "ITEM_ID_PATTERN",
    "MEMORY_DELETE",
    "MEMORY_GET",
    "MEMORY_LIST",
    "MEMORY_SAVE",
    "MEMORY_SEARCH",
    "METADATA_KEY_PATTERN",
    "NOT_FOUND",
    "TOO_LARGE",
    "UNAVAILABLE",
    "DeleteRequest",
    "DeleteResponse",
    "GetRequest",
    "ListRequest",
    "ListResponse",
    "MemoryHit",
    "MemoryItem",
    "MemoryScope",
    "SaveRequest",
    "SaveResponse",
    "ScalarValue",
    "SearchRequest",
    "SearchResponse",
]

NOT_FOUND = "not_found"
"""No item with that id in that scope."""
INVALID_REQUEST = "invalid_request"
TOO_LARGE = "too_large"
"""The text (or the metadata) is over the worker's size limit."""
UNAVAILABLE = "unavailable"
"""The store cannot be reached or failed (transient: an idempotent call may be retried)."""

ITEM_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
METADATA_KEY_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
ScalarValue = StrictBool | StrictInt | StrictFloat | str
"""A metadata filter value: compared for equality with the item's top-level value."""


class _Response(Strict):
    schema_version: int = 1


class MemoryScope(BaseModel):
    """Whose memory: a user's, an agent's or a workspace's, by id."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    kind: Literal["user", "agent", "workspace"]
    id: str = Field(pattern=r"^[A-Za-z0-9_.:@-]{1,128}$", description="e.g. a user or agent name")

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


_SCOPE_FIELD = Field(
    default=None,
    description="Whose memory (kind user|agent|workspace and an id); omit it for the default.",
)


class MemoryItem(_Response):
    id: str
    scope: MemoryScope
    text: str
    metadata: dict[str, JsonValue]
    created_at: float = Field(description="seconds since the epoch")
    updated_at: float = Field(description="seconds since the epoch")


class MemoryHit(_Response):
    item: MemoryItem
    score: float = Field(description="higher is better, in (0, 1)")


class SaveRequest(_Request):
    text: str = Field(min_length=1, description="The fact or note to remember, in plain words.")
    metadata: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Optional labels (top-level keys are what search filters on).",
    )
    id: str | None = Field(
        default=None,
        pattern=ITEM_ID_PATTERN,
        description="Save under this id, replacing the item that has it; omit it for a new one.",
    )
    scope: MemoryScope | None = _SCOPE_FIELD


class SaveResponse(_Response):
    item: MemoryItem
    created: bool = Field(description="false when an item with this id was replaced")


class SearchRequest(_Request):
    query: str = Field(min_length=1, max_length=2000, description="Words to look for.")
    scope: MemoryScope | None = _SCOPE_FIELD
    limit: int = Field(default=10, ge=1, le=50)
    metadata: dict[str, ScalarValue] = Field(
        default_factory=dict,
        description="Only items whose metadata has each of these top-level keys equal to it.",
    )


class SearchResponse(_Response):
    hits: list[MemoryHit]


class GetRequest(_Request):
    id: str = Field(pattern=ITEM_ID_PATTERN)
    scope: MemoryScope | None = _SCOPE_FIELD


class DeleteRequest(_Request):
    id: str = Field(pattern=ITEM_ID_PATTERN)
    scope: MemoryScope | None = _SCOPE_FIELD


class DeleteResponse(_Response):
    deleted: bool = Field(description="false when there was no such item")


class ListRequest(_Request):
    scope: MemoryScope | None = _SCOPE_FIELD
    limit: int = Field(default=50, ge=1, le=200)
    offset: int = Field(default=0, ge=0)
    metadata: dict[str, ScalarValue] = Field(default_factory=dict)


class ListResponse(_Response):
    items: list[MemoryItem] = Field(description="most recently updated first")
    has_more: bool


MEMORY_SAVE: Tool[SaveRequest, SaveResponse] = Tool(
    "memory::save",
    SaveRequest,
    SaveResponse,
    description=(
        "Remember a fact for later sessions: a short self-contained sentence, with optional "
        "metadata labels. Give an id to replace an earlier item."
    ),
    idempotent=False,
)
MEMORY_SEARCH: Tool[SearchRequest, SearchResponse] = Tool(
    "memory::search",
    SearchRequest,
    SearchResponse,
    description=(
        "Search long-term memory by words (full text, best match first); items matching more "
        "of the words rank higher. Optionally filter on metadata labels."
    ),
    idempotent=True,
    read_only=True,
)
MEMORY_GET: Tool[GetRequest, MemoryItem] = Tool(
    "memory::get",
    GetRequest,
    MemoryItem,
    description="One remembered item by its id.",
    idempotent=True,
    read_only=True,
)
MEMORY_DELETE: Tool[DeleteRequest, DeleteResponse] = Tool(
    "memory::delete",
    DeleteRequest,
    DeleteResponse,
    description="Forget a remembered item by its id.",
    idempotent=True,
)
MEMORY_LIST: Tool[ListRequest, ListResponse] = Tool(
    "memory::list",
    ListRequest,
    ListResponse,
    description="Remembered items, most recently updated first (paged with offset).",
    idempotent=True,
    read_only=True,
)
