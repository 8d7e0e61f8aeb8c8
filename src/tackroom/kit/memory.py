"""What every long-term memory worker shares: the store it wraps, its config, and the five tools.

A memory worker supplies a :class:`MemoryStore` (synchronous and thread-safe; called through
``asyncio.to_thread``) and calls :func:`serve_memory`; the limits, the default scope, the query
words, ids, timestamps and errors are decided here once, so every backend answers alike.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from pydantic import Field, JsonValue, field_validator

from tackroom.contracts.memory import (
    INVALID_REQUEST,
    MEMORY_DELETE,
    MEMORY_GET,
    MEMORY_LIST,
    MEMORY_SAVE,
    MEMORY_SEARCH,
    METADATA_KEY_PATTERN,
    NOT_FOUND,
    TOO_LARGE,
    UNAVAILABLE,
    DeleteRequest,
    DeleteResponse,
    GetRequest,
    ListRequest,
    ListResponse,
    MemoryHit,
    MemoryItem,
    MemoryScope,
    SaveRequest,
    SaveResponse,
    ScalarValue,
    SearchRequest,
    SearchResponse,
)
from tackroom.contracts.tenancy import qualify
from tackroom.contracts.tools import CallContext
from tackroom.engine.errors import FunctionError
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext

__all__ = [
    "MAX_QUERY_TERMS",
    "MemoryConfig",
    "MemoryStore",
    "all_words_first",
    "falling_hits",
    "new_item_id",
    "query_terms",
    "score_of_rank",
    "serve_memory",
]

MAX_QUERY_TERMS = 32
"""Words of a query past this many are ignored (a pasted page is not a query)."""
_WORD = re.compile(r"\w+")
_KEY = re.compile(METADATA_KEY_PATTERN)
T = TypeVar("T")


class MemoryConfig(WorkerConfig):
    """The options every memory worker takes."""

    default_scope: MemoryScope = Field(
        default=MemoryScope(kind="workspace", id="default"),
        description="the scope of a request that names none ('kind:id' or {kind, id})",
    )
    max_text_bytes: int = Field(default=16_384, ge=1, description="UTF-8 bytes of one item")
    max_metadata_bytes: int = Field(default=4096, ge=2, description="of its metadata as JSON")

    @field_validator("default_scope", mode="before")
    @classmethod
    def _scope_from_text(cls, value: Any) -> Any:
        if isinstance(value, str) and ":" in value:
            kind, _, scope_id = value.partition(":")
            return {"kind": kind, "id": scope_id}
        return value


class MemoryStore(Protocol):
    """One backend's storage. Scopes arrive as ``kind:id`` text; ``filters`` are checked keys
    (:data:`~tackroom.contracts.memory.METADATA_KEY_PATTERN`) with scalar values."""

    def save(
        self, scope: MemoryScope, item_id: str, text: str, metadata: str, now: float
    ) -> tuple[MemoryItem, bool]:
        """Insert or replace; ``metadata`` is JSON text. True when the item is new."""
        ...

    def get(self, scope: MemoryScope, item_id: str) -> MemoryItem | None: ...

    def delete(self, scope: MemoryScope, item_id: str) -> bool: ...

    def list_items(
        self, scope: MemoryScope, *, limit: int, offset: int, filters: Mapping[str, ScalarValue]
    ) -> tuple[list[MemoryItem], bool]: ...

    def search(
        self,
        scope: MemoryScope,
        terms: list[str],
        *,
        limit: int,
        filters: Mapping[str, ScalarValue],
    ) -> list[MemoryHit]:
        """Items with all of ``terms`` (lowercase words) best first; when fewer than ``limit``,
        then items with any of them, best first, without repeats (docs/workers/memory.md)."""
        ...

    def close(self) -> None: ...


def query_terms(query: str) -> list[str]:
    """The distinct words of ``query``, lowercased, in order: what a backend matches, never its
    query syntax (quotes, ``AND``/``OR``/``NOT``, ``*``, ``:`` and parentheses are dropped)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        seen.setdefault(word, None)
    return list(seen)[:MAX_QUERY_TERMS]


def score_of_rank(rank: float) -> float:
    """A non-negative rank (higher is better) squeezed into ``(0, 1)``."""
    rank = max(rank, 1e-9)
    return rank / (1.0 + rank)


def all_words_first(
    terms: list[str],
    limit: int,
    ranked: Callable[[bool], list[T]],
    key: Callable[[T], Hashable],
) -> list[T]:
    """The search rule every backend follows: ``ranked(True)`` (items with all of ``terms``,
    best first), then — when that found fewer than ``limit`` — ``ranked(False)`` (items with
    any of them), leaving out what came already (same ``key``); ``limit`` at most."""
    rows = ranked(True)
    if len(rows) < limit and len(terms) > 1:
        seen = {key(row) for row in rows}
        rows += [row for row in ranked(False) if key(row) not in seen]
    return rows[:limit]


def falling_hits(scored: Iterable[tuple[MemoryItem, float]]) -> list[MemoryHit]:
    """Hits in the given order, each score (a non-negative rank, see :func:`score_of_rank`)
    capped at the one before: an any-word hit, ranked by another query, never outscores the
    all-words hit ahead of it."""
    hits, floor = [], 1.0
    for item, rank in scored:
        floor = min(floor, score_of_rank(rank))
        hits.append(MemoryHit(item=item, score=floor))
    return hits


def new_item_id() -> str:
    return f"mem_{uuid.uuid4().hex}"


def _checked_filters(filters: Mapping[str, ScalarValue]) -> Mapping[str, ScalarValue]:
    for key in filters:
        if not _KEY.match(key):
            raise FunctionError(
                INVALID_REQUEST,
                f"metadata filter key {key!r} is not a plain name (letters, digits, _ and -)",
            )
    return filters


def _metadata_json(metadata: dict[str, JsonValue], limit: int) -> str:
    text = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    size = len(text.encode("utf-8"))
    if size > limit:
        raise FunctionError(TOO_LARGE, f"metadata is {size} bytes as JSON; the limit is {limit}")
    return text


async def serve_memory(ctx: WorkerContext[Any], store: MemoryStore, config: MemoryConfig) -> None:
    """Serve ``memory::save|search|get|delete|list`` on ``store``, and close it at shutdown."""
    ctx.spawn(_close_at_shutdown(store), name=f"{ctx.name}: close the store")
    lock = asyncio.Lock()  # one call at a time into the store: its connection is not shared

    async def on_store(work: Callable[[], T]) -> T:
        async with lock:
            try:
                return await asyncio.to_thread(work)
            except FunctionError:
                raise
            except Exception as exc:  # the file went away, the server stopped: one line
                name = type(exc).__name__
                raise FunctionError(UNAVAILABLE, f"the memory store failed ({name})") from None

    def scope_of(scope: MemoryScope | None, call: CallContext | None) -> MemoryScope:
        """The scope named (or the default), within the tenant of the run that calls: another
        tenant's memory is never reached (:func:`~tackroom.contracts.tenancy.qualify`)."""
        named = config.default_scope if scope is None else scope
        principal = None if call is None else call.principal
        if principal is None:
            return named
        return named.model_copy(update={"id": qualify(principal.tenant, named.id)})

    async def save(request: SaveRequest, call: CallContext | None) -> SaveResponse:
        size = len(request.text.encode("utf-8"))
        if size > config.max_text_bytes:
            raise FunctionError(
                TOO_LARGE,
                f"text is {size} bytes; the limit is {config.max_text_bytes}: save a shorter note",
            )
        metadata = _metadata_json(request.metadata, config.max_metadata_bytes)
        scope, item_id = scope_of(request.scope, call), request.id or new_item_id()
        item, created = await on_store(
            lambda: store.save(scope, item_id, request.text, metadata, time.time())
        )
        return SaveResponse(item=item, created=created)

    async def search(request: SearchRequest, call: CallContext | None) -> SearchResponse:
        filters, terms = _checked_filters(request.metadata), query_terms(request.query)
        if not terms:
            return SearchResponse(hits=[])
        scope = scope_of(request.scope, call)
        hits = await on_store(
            lambda: store.search(scope, terms, limit=request.limit, filters=filters)
        )
        return SearchResponse(hits=hits)

    async def get(request: GetRequest, call: CallContext | None) -> MemoryItem:
        scope = scope_of(request.scope, call)
        item = await on_store(lambda: store.get(scope, request.id))
        if item is None:
            raise FunctionError(NOT_FOUND, f"no memory item {request.id!r} in scope {scope}")
        return item

    async def delete(request: DeleteRequest, call: CallContext | None) -> DeleteResponse:
        scope = scope_of(request.scope, call)
        return DeleteResponse(deleted=await on_store(lambda: store.delete(scope, request.id)))

    async def list_(request: ListRequest, call: CallContext | None) -> ListResponse:
        filters, scope = _checked_filters(request.metadata), scope_of(request.scope, call)
        limit, offset = request.limit, request.offset
        items, more = await on_store(
            lambda: store.list_items(scope, limit=limit, offset=offset, filters=filters)
        )
        return ListResponse(items=items, has_more=more)

    limit = f" Texts over {config.max_text_bytes} bytes are refused."
    await serve_tool(ctx, MEMORY_SAVE, save, description=MEMORY_SAVE.description + limit)
    await serve_tool(ctx, MEMORY_SEARCH, search)
    await serve_tool(ctx, MEMORY_GET, get)
    await serve_tool(ctx, MEMORY_DELETE, delete)
    await serve_tool(ctx, MEMORY_LIST, list_)


async def _close_at_shutdown(store: MemoryStore) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        store.close()
