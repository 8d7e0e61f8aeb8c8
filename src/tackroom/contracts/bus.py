"""Typed descriptors for everything that crosses a worker wall.

A contract module declares each fact once — a function with its request and response models, a
shared state scope with its value model, an event stream with its event type — and both sides
import the descriptor::

    APPEND_BATCH = Function("session-tree::append_batch", AppendBatchRequest, AppendBatchResponse)

    await ctx.serve(APPEND_BATCH, append_batch)                      # the worker
    reply = await APPEND_BATCH.call(bus, AppendBatchRequest(...))    # a caller: typed reply
    await APPEND_BATCH.send(bus, AppendBatchRequest(...))            # a caller that needs no reply

Ids a config may change (``policy_function``, a provider's name) keep working: ``.at(other_id)``
is the same contract under another id. Adapters for non-model types are built on first use, so
importing a contract module costs no schema work.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any, Generic, Literal, Self, TypeVar, cast

from pydantic import BaseModel, TypeAdapter

from tackroom.contracts.provenance import SideEffect
from tackroom.engine.protocol import (
    DEFAULT_TIMEOUT,
    Caller,
    StateBackend,
    StateEntry,
    Streams,
    Subscription,
)

__all__ = ["Caller", "Function", "Scope", "Stream", "Tool", "dump", "load"]

Req = TypeVar("Req", bound=BaseModel)
Resp = TypeVar("Resp")
V = TypeVar("V")
E = TypeVar("E")


class _Codec(Generic[V]):
    """Validates JSON-shaped data into ``V`` and dumps ``V`` back; a model class is used directly,
    anything else (a union, ``list[X]``, ``X | None``) through a lazily built ``TypeAdapter``."""

    __slots__ = ("_adapter", "_model", "type")

    def __init__(self, type_: Any) -> None:
        self.type = type_
        self._model: type[BaseModel] | None = (
            type_ if isinstance(type_, type) and issubclass(type_, BaseModel) else None
        )
        self._adapter: TypeAdapter[Any] | None = None

    def adapter(self) -> TypeAdapter[Any]:
        if self._adapter is None:
            self._adapter = TypeAdapter(self.type)
        return self._adapter

    def load(self, data: Any) -> V:
        if self._model is not None:
            return cast(V, self._model.model_validate(data))
        return cast(V, self.adapter().validate_python(data))

    def dump(self, value: V) -> Any:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        return self.adapter().dump_python(value, mode="json")

    def json_schema(self) -> dict[str, Any]:
        if self._model is not None:
            return self._model.model_json_schema()
        return self.adapter().json_schema()


def dump(value: Any) -> Any:
    """``value`` as JSON-shaped data (a model dumped in JSON mode, anything else as it is)."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def load(type_: type[V], data: Any) -> V:
    return _Codec[V](type_).load(data)


class Function(Generic[Req, Resp]):
    """A function on the bus: its id, request model and response type. ``hop``: plumbing (a
    session read, an inbox peek) whose invocations make no span of their own when tracing keeps
    spans for steps; the trace passes through it (``tackroom.engine.tracing``)."""

    __slots__ = ("_response", "description", "hop", "id", "request")

    def __init__(
        self,
        id: str,
        request: type[Req],
        response: Any,
        *,
        description: str = "",
        hop: bool = False,
    ) -> None:
        self.id = id
        self.request = request
        self._response: _Codec[Resp] = _Codec(response)
        self.description = description
        self.hop = hop

    @property
    def response(self) -> Any:
        return self._response.type

    @property
    def contract_version(self) -> int:
        """The contract's version: its request's ``schema_version`` default (1 without one),
        what a worker serving it announces in the catalog."""
        field = self.request.model_fields.get("schema_version")
        default = None if field is None else field.default
        return default if isinstance(default, int) and not isinstance(default, bool) else 1

    def at(self, function_id: str) -> Self:
        """The same contract served under ``function_id`` (configurable ids): a copy, so a
        :class:`Tool` keeps its traits and the response adapter built so far is shared."""
        twin = copy.copy(self)
        twin.id = function_id
        return twin

    async def call(self, bus: Caller, request: Req, *, timeout: float = DEFAULT_TIMEOUT) -> Resp:
        """Trigger the function with ``request`` and return its validated reply."""
        reply = await bus.trigger(self.id, _payload(bus, request), timeout=timeout)
        return self._response.load(reply)

    async def send(self, bus: Caller, request: Req, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Trigger the function with ``request`` for its effect and leave the reply unread: no
        validation is spent on an answer the caller does not use (a failure still raises)."""
        await bus.trigger(self.id, _payload(bus, request), timeout=timeout)

    def is_response(self, value: Any) -> bool:
        """Whether ``value`` is already this function's response model (it needs no dump)."""
        model = self._response._model
        return model is not None and isinstance(value, model)

    def parse_response(self, data: Any) -> Resp:
        return self._response.load(data)

    def dump_response(self, value: Resp) -> Any:
        return self._response.dump(value)

    def response_schema(self) -> dict[str, Any]:
        return self._response.json_schema()

    def __repr__(self) -> str:
        return f"Function({self.id!r})"


class Tool(Function[Req, Resp]):
    """A function offered to models as a tool: the traits the orchestrator reads from the catalog
    travel with the descriptor (``idempotent`` calls are retried after a crash and on a transient
    error, ``parallel`` ones run concurrently in a batch, ``read_only`` ones may run in plan mode;
    ``timeout`` is the call's default limit in seconds, ``required_permission`` what the run's
    principal must hold, ``max_result_chars`` how much of one result the model reads before it
    is clipped, ``on_policy_error`` whether a call fails open when the policy check fails,
    ``untrusted_output`` whether its results hold content a third party could have written,
    ``side_effect`` what a call may change and ``sinks`` the arguments that say where data goes;
    see :class:`~tackroom.contracts.tools.ToolTraits`)."""

    __slots__ = (
        "idempotent",
        "max_result_chars",
        "on_policy_error",
        "parallel",
        "read_only",
        "required_permission",
        "side_effect",
        "sinks",
        "timeout",
        "untrusted_output",
    )

    def __init__(
        self,
        id: str,
        request: type[Req],
        response: Any,
        *,
        description: str = "",
        idempotent: bool,
        parallel: bool = True,
        read_only: bool = False,
        timeout: float | None = None,
        required_permission: str | None = None,
        max_result_chars: int | None = None,
        on_policy_error: Literal["deny", "allow"] | None = None,
        untrusted_output: bool = False,
        side_effect: SideEffect | None = None,
        sinks: tuple[str, ...] = (),
    ) -> None:
        super().__init__(id, request, response, description=description)
        self.idempotent = idempotent
        self.parallel = parallel
        self.read_only = read_only
        self.timeout = timeout
        self.required_permission = required_permission
        self.max_result_chars = max_result_chars
        self.on_policy_error = on_policy_error
        self.untrusted_output = untrusted_output
        self.side_effect = side_effect
        self.sinks = sinks


class _Named(Generic[V]):
    """A named place on the bus (a state scope, a stream) whose values are ``V``."""

    __slots__ = ("_codec", "name")

    def __init__(self, name: str, type_: Any) -> None:
        self.name = name
        self._codec: _Codec[V] = _Codec(type_)

    def parse(self, data: Any) -> V:
        return self._codec.load(data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Scope(_Named[V]):
    """A shared state scope whose values are ``V``."""

    __slots__ = ()

    async def get(self, bus: StateBackend, key: str) -> V | None:
        entry = await bus.get_state(self.name, key)
        return None if entry is None else self._codec.load(entry.value)

    async def get_entry(self, bus: StateBackend, key: str) -> tuple[V, int] | None:
        """The value and its revision (for a compare-and-set after)."""
        entry = await bus.get_state(self.name, key)
        return None if entry is None else (self._codec.load(entry.value), entry.revision)

    async def set(
        self, bus: StateBackend, key: str, value: V, *, expected_revision: int | None = None
    ) -> StateEntry:
        return await bus.set_state(
            self.name, key, self._codec.dump(value), expected_revision=expected_revision
        )

    async def delete(
        self, bus: StateBackend, key: str, *, expected_revision: int | None = None
    ) -> bool:
        return await bus.delete_state(self.name, key, expected_revision=expected_revision)

    async def list(self, bus: StateBackend, *, prefix: str = "") -> list[tuple[str, V]]:
        entries = await bus.list_state(self.name, prefix=prefix)
        return [(entry.key, self._codec.load(entry.value)) for entry in entries]

    def dump_value(self, value: V) -> Any:
        return self._codec.dump(value)


class Stream(_Named[E]):
    """An event stream (one group per session, say) whose records are ``E``."""

    __slots__ = ()

    async def append(self, bus: Streams, group_id: str, event: E) -> int:
        return await bus.append(self.name, group_id, self._codec.dump(event))

    async def read(
        self, bus: Streams, group_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, E]]:
        records = await bus.read(self.name, group_id, after=after, limit=limit)
        return [(record.seq, self._codec.load(record.data)) for record in records]

    async def subscribe(self, bus: Streams, group_id: str, *, after: int = 0) -> Subscription:
        """The raw subscription (records carry JSON data); :meth:`parse` types one record."""
        return await bus.subscribe(self.name, group_id, after=after)

    async def events(
        self, bus: Streams, group_id: str, *, after: int = 0
    ) -> AsyncIterator[tuple[int, E]]:
        """``(seq, event)`` pairs from ``after`` on, stored first, then live; closes the
        subscription when the caller stops iterating."""
        subscription = await bus.subscribe(self.name, group_id, after=after)
        try:
            async for record in subscription:
                yield record.seq, self._codec.load(record.data)
        finally:
            await subscription.aclose()

    def dump_event(self, event: E) -> Any:
        return self._codec.dump(event)


def _payload(bus: Caller, request: BaseModel) -> Any:
    """The request as the bus takes it: the model itself where the bus passes models by
    reference to in-process handlers (``takes_models``), else its JSON."""
    if getattr(bus, "takes_models", False):
        return request
    return request.model_dump(mode="json")
