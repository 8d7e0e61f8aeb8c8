"""Long-term memory for a harness: seed 003's ``MemoryAdapter``, an object with ``save`` and
``load``.

The rest of tackroom reaches long-term memory through two functions on the bus:
``memory::save`` (the model's tool for remembering) and ``memory::search`` (the model's tool
for recalling, and automatic recall before a run's first model call). By default the
``memory`` worker serves them; ``Harness.use_memory(adapter)`` serves them from a program's own
adapter instead (:func:`adapter_worker`), so tools, recall and the gate use it unchanged:

- ``memory::save`` → ``adapter.save(text, metadata)``; what it returns, when a string, is the
  item's id;
- ``memory::search`` → ``adapter.load(query, limit)``; it returns the memories best first, each
  a string, a :class:`Memory`, or a mapping with ``text`` (and ``id``, ``metadata``,
  ``score``).

Either method may be sync (it runs in a thread) or async, and may take only its first argument.
An adapter is one memory: a request naming an ``id`` or a ``scope`` is refused, saying so
(``memory::get``, ``delete`` and ``list`` are not served). :class:`BusMemory` is the same two
methods the other way round — a program's handle on whatever serves them.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import math
import re
import time
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import JsonValue

from tackroom.contracts.bus import Caller
from tackroom.contracts.memory import (
    INVALID_REQUEST,
    ITEM_ID_PATTERN,
    MEMORY_SAVE,
    MEMORY_SEARCH,
    UNAVAILABLE,
    MemoryHit,
    MemoryItem,
    MemoryScope,
    SaveRequest,
    SaveResponse,
    SearchRequest,
    SearchResponse,
)
from tackroom.contracts.tools import CallContext
from tackroom.engine.errors import FunctionError
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = [
    "ADAPTER_WORKER",
    "BusMemory",
    "Memory",
    "MemoryAdapter",
    "adapter_worker",
    "is_memory_adapter",
    "warn_session_store_once",
]

ADAPTER_WORKER = "harness-memory"
"""The worker name a program's adapter is served under."""

_SCOPE = MemoryScope(kind="workspace", id="default")
_ITEM_ID = re.compile(ITEM_ID_PATTERN)


@dataclass(frozen=True, slots=True)
class Memory:
    """One remembered item as ``load`` returns it: best matches first."""

    text: str
    id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float | None = None
    """Higher is better, in (0, 1); ``None``: ranked by position."""


@runtime_checkable
class MemoryAdapter(Protocol):
    """Long-term memory as seed 003 writes it. Either method may be ``async``."""

    def save(self, text: str, metadata: dict[str, Any], /) -> str | Awaitable[str | None] | None:
        """Keep ``text`` (with ``metadata``); the item's id, or ``None``."""
        ...

    def load(
        self, query: str, limit: int, /
    ) -> (
        Iterable[str | Memory | Mapping[str, Any]]
        | Awaitable[Iterable[str | Memory | Mapping[str, Any]]]
    ):
        """At most ``limit`` memories for ``query``, best first."""
        ...


def is_memory_adapter(value: object) -> bool:
    return callable(getattr(value, "save", None)) and callable(getattr(value, "load", None))


class BusMemory:
    """``save``/``load`` through ``memory::save``/``memory::search``: the memory worker, or the
    adapter a harness serves (``Harness.memory``). ``scope``: whose memory (default: the
    serving worker's own)."""

    def __init__(self, bus: Caller, *, scope: MemoryScope | None = None) -> None:
        self._bus = bus
        self._scope = scope

    async def save(self, text: str, metadata: Mapping[str, JsonValue] | None = None) -> str:
        request = SaveRequest(text=text, metadata=dict(metadata or {}), scope=self._scope)
        return (await MEMORY_SAVE.call(self._bus, request)).item.id

    async def load(self, query: str, limit: int = 10) -> list[Memory]:
        request = SearchRequest(query=query, limit=limit, scope=self._scope)
        reply = await MEMORY_SEARCH.call(self._bus, request)
        return [
            Memory(hit.item.text, hit.item.id, dict(hit.item.metadata), hit.score)
            for hit in reply.hits
        ]


class _NoConfig(WorkerConfig):
    pass


def adapter_worker(adapter: Any, *, name: str = ADAPTER_WORKER) -> WorkerSpec[Any]:
    """A worker serving ``memory::save`` and ``memory::search`` from ``adapter``."""
    save_method, load_method = _method(adapter, "save"), _method(adapter, "load")

    async def save(request: SaveRequest, call: CallContext | None) -> SaveResponse:
        _one_memory(request.id, request.scope)
        returned = await _called(save_method, request.text, dict(request.metadata))
        now = time.time()
        item = MemoryItem(
            id=_item_id(returned, request.text),
            scope=_SCOPE,
            text=request.text,
            metadata=request.metadata,
            created_at=now,
            updated_at=now,
        )
        return SaveResponse(item=item, created=True)

    async def search(request: SearchRequest, call: CallContext | None) -> SearchResponse:
        _one_memory(None, request.scope)
        found = await _called(load_method, request.query, request.limit)
        if found is None or isinstance(found, (str, bytes)) or not isinstance(found, Iterable):
            raise FunctionError(
                UNAVAILABLE,
                f"the memory adapter's load returned {type(found).__name__}, not a list",
            )
        memories = [_memory(value) for value in found]
        wanted = request.metadata.items()
        kept = [m for m in memories if all(m.metadata.get(k) == v for k, v in wanted)]
        return SearchResponse(hits=_hits(kept[: request.limit]))

    async def start(ctx: WorkerContext[_NoConfig]) -> None:
        note = " (this program's memory: no id or scope)"
        await serve_tool(ctx, MEMORY_SAVE, save, description=MEMORY_SAVE.description + note)
        await serve_tool(ctx, MEMORY_SEARCH, search)

    return WorkerSpec(
        name=name,
        description=f"Long-term memory (memory::save, ::search) from {type(adapter).__name__}.",
        config_model=_NoConfig,
        start=start,
    )


def _method(adapter: Any, name: str) -> Callable[..., Any]:
    method = getattr(adapter, name, None)
    if not callable(method):
        raise TypeError(f"a memory adapter needs a {name} method")
    return method  # type: ignore[no-any-return]


async def _called(method: Callable[..., Any], *args: Any) -> Any:
    """``method`` with as many of ``args`` as it takes; sync ones in a thread. Its failure is
    the store's (``unavailable``), in one line."""
    args = args[: _positional_count(method, len(args))]
    try:
        if inspect.iscoroutinefunction(method):
            return await method(*args)
        value = await asyncio.to_thread(method, *args)
        return await value if inspect.isawaitable(value) else value
    except FunctionError:
        raise
    except Exception as exc:
        failure = f"the memory adapter failed: {type(exc).__name__}: {exc}"
        raise FunctionError(UNAVAILABLE, failure) from exc


def _positional_count(method: Callable[..., Any], most: int) -> int:
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return most
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return most
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return max(1, min(most, sum(1 for p in parameters if p.kind in positional)))


def _one_memory(item_id: str | None, scope: MemoryScope | None) -> None:
    if item_id is not None or (scope is not None and scope != _SCOPE):
        named = "an id" if item_id is not None else f"the scope {scope}"
        raise FunctionError(
            INVALID_REQUEST,
            f"this memory is one store with no ids or scopes: leave out {named}",
        )


def _memory(value: Any) -> Memory:
    if isinstance(value, Memory):
        return value
    if isinstance(value, str):
        return Memory(value)
    if isinstance(value, Mapping) and isinstance(value.get("text"), str):
        score = value.get("score")
        return Memory(
            value["text"],
            id=value.get("id") if isinstance(value.get("id"), str) else None,
            metadata=dict(value.get("metadata") or {}),
            score=float(score) if isinstance(score, (int, float)) else None,
        )
    text = getattr(value, "text", None)
    if isinstance(text, str):
        fields = {k: getattr(value, k, None) for k in ("id", "metadata", "score")}
        return _memory({**fields, "text": text})
    raise FunctionError(
        UNAVAILABLE,
        f"the memory adapter's load returned a {type(value).__name__}: return strings, Memory"
        " objects or mappings with text",
    )


def _hits(memories: list[Memory]) -> list[MemoryHit]:
    """Hits in the adapter's order, each score in (0, 1) and never above the one before."""
    hits, ceiling = [], 1.0
    for rank, memory in enumerate(memories):
        score = memory.score
        if score is None or not math.isfinite(score) or not 0 < score < 1:
            score = 1 / (rank + 2)
        ceiling = min(ceiling, score)
        item = MemoryItem(
            id=_item_id(memory.id, memory.text),
            scope=_SCOPE,
            text=memory.text,
            metadata=memory.metadata,
            created_at=0.0,
            updated_at=0.0,
        )
        hits.append(MemoryHit(item=item, score=ceiling))
    return hits


def _item_id(given: Any, text: str) -> str:
    """The adapter's id when it is one the contract allows, else one derived from the text."""
    if isinstance(given, str) and _ITEM_ID.fullmatch(given):
        return given
    return "mem_" + hashlib.sha256(text.encode()).hexdigest()[:32]


_warned = False


def warn_session_store_once() -> None:
    """``use_memory(worker)`` is the old name of ``use_session_store``: say so, once a process."""
    global _warned
    if _warned:
        return
    _warned = True
    warnings.warn(
        "Harness.use_memory(worker) swaps the session store and is renamed"
        " use_session_store(worker); use_memory(adapter) is long-term memory (save/load)",
        DeprecationWarning,
        stacklevel=3,
    )
