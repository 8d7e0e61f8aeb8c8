"""The ``Engine`` protocol: the one bus every worker talks through.

Every backend (``embedded`` today, ``nats`` next) implements this protocol and passes the one
conformance suite in ``tests/conformance``. Payloads, results, state values and stream records
are JSON values; a pydantic model given as a payload is serialized at the edge.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

__all__ = [
    "DEFAULT_TIMEOUT",
    "Channel",
    "ChannelRef",
    "ChannelWriter",
    "DeadLetter",
    "Engine",
    "FunctionInfo",
    "Handler",
    "Invocation",
    "InvocationKind",
    "LazySchema",
    "QueueConfig",
    "Registration",
    "StateEntry",
    "StreamRecord",
    "StreamRetention",
    "Subscription",
    "UpdateOp",
    "WorkerInfo",
    "current_invocation",
]

DEFAULT_TIMEOUT = 30.0

Handler = Callable[[Any], Awaitable[Any]]
"""A function handler: takes the JSON payload, returns a JSON result (or raises)."""

InvocationKind = Literal["trigger", "queue", "state_trigger", "stream_trigger", "cron"]


@dataclass(slots=True)
class Invocation:
    """What the runtime knows about the call a handler is serving.

    Read it with :func:`current_invocation` inside a handler. ``attempt`` counts deliveries of a
    queue message (1 on the first). ``extend_visibility`` keeps a long queue handler's lease.
    """

    function_id: str
    kind: InvocationKind
    attempt: int = 1
    message_id: str | None = None
    group: str | None = None
    _extend: Callable[[float], Awaitable[None]] | None = field(default=None, repr=False)

    async def extend_visibility(self, seconds: float) -> None:
        """Push this delivery's visibility deadline ``seconds`` from now (queue deliveries only)."""
        if self._extend is not None:
            await self._extend(seconds)


_current_invocation: ContextVar[Invocation | None] = ContextVar("tackroom_invocation", default=None)


def current_invocation() -> Invocation | None:
    """The invocation the running handler serves, or ``None`` outside a handler."""
    return _current_invocation.get()


def set_current_invocation(invocation: Invocation | None) -> object:
    """Backend hook: make ``invocation`` current; returns a token for :func:`reset_invocation`."""
    return _current_invocation.set(invocation)


def reset_invocation(token: object) -> None:
    _current_invocation.reset(token)  # type: ignore[arg-type]


class UpdateOp(TypedDict, total=False):
    """One atomic op of :meth:`Engine.update_state`.

    ``op`` is one of ``set``, ``merge`` (shallow dict merge), ``append`` (to a list),
    ``increment`` (a number), ``remove`` (a dict field). ``path`` is a list of dict keys from
    the root of the value (empty or absent: the root itself).
    """

    op: Literal["set", "merge", "append", "increment", "remove"]
    path: list[str]
    value: Any


@dataclass(frozen=True, slots=True)
class StateEntry:
    scope: str
    key: str
    value: Any
    revision: int


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """A stored record, or (``live``) a frame :meth:`Engine.publish` sent or a value
    :meth:`Engine.snapshot` returned, which is never stored.

    A live record has no sequence of its own: its ``seq`` is that of the stored record it
    follows (for a subscription, the last stored record it handed out), so a reader that keeps
    ``seq`` as its resume cursor is never moved past a stored record by a live one.
    """

    stream: str
    group_id: str
    seq: int
    data: Any
    timestamp: float
    live: bool = False


class LazySchema:
    """A JSON schema built the first time it is read, then kept.

    What a worker gives ``register_function`` when building a schema costs time: pydantic takes
    milliseconds a model, a boot registers dozens of functions, and a run reads only its tools'
    schemas. :class:`FunctionInfo` builds it when its schema is read (``engine::functions::list``
    reads them all; the NATS catalog, which publishes them, too). A build that raises raises
    there, and again at the next read: where the schema is read, not where it was registered.
    """

    __slots__ = ("_build", "_schema")

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self._build: Callable[[], dict[str, Any]] | None = build
        self._schema: dict[str, Any] = {}

    def get(self) -> dict[str, Any]:
        if self._build is not None:
            self._schema = self._build()
            self._build = None
        return self._schema


class FunctionInfo:
    """A function in the catalog. A schema registered as a :class:`LazySchema` is built when its
    attribute is first read."""

    __slots__ = (
        "_request",
        "_response",
        "contract_version",
        "description",
        "function_id",
        "version",
        "worker",
    )

    def __init__(
        self,
        function_id: str,
        worker: str,
        description: str,
        request_schema: dict[str, Any] | LazySchema | None,
        response_schema: dict[str, Any] | LazySchema | None,
        *,
        version: str = "",
        contract_version: int | None = None,
    ) -> None:
        self.function_id = function_id
        self.worker = worker
        self.description = description
        self._request = request_schema
        self._response = response_schema
        self.version = version
        """The serving worker's own version (``""``: it announced none)."""
        self.contract_version = contract_version
        """The ``schema_version`` of the contract it serves (``None``: no declared contract)."""

    @property
    def request_schema(self) -> dict[str, Any] | None:
        return self._request.get() if isinstance(self._request, LazySchema) else self._request

    @property
    def response_schema(self) -> dict[str, Any] | None:
        return self._response.get() if isinstance(self._response, LazySchema) else self._response

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.function_id,
            self.worker,
            self.description,
            self.request_schema,
            self.response_schema,
            self.version,
            self.contract_version,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FunctionInfo):
            return NotImplemented
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        return f"FunctionInfo({self.function_id!r}, worker={self.worker!r})"


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker as one process announces it: what it serves, at which versions, where."""

    name: str
    functions: list[str]
    pid: int
    host: str
    version: str = ""
    """The worker's own version (``""``: it announced none)."""
    contracts: dict[str, int] = field(default_factory=dict)
    """``function_id -> schema_version`` of each contract function it serves."""

    @classmethod
    def of(cls, functions: Iterable[FunctionInfo], *, pid: int, host: str) -> list[WorkerInfo]:
        """One ``WorkerInfo`` per worker name among ``functions`` (one process's), sorted."""
        grouped: dict[str, list[FunctionInfo]] = {}
        for info in functions:
            grouped.setdefault(info.worker, []).append(info)
        return [
            cls(
                name=name,
                functions=sorted({info.function_id for info in infos}),
                pid=pid,
                host=host,
                version=next((info.version for info in infos if info.version), ""),
                contracts={
                    info.function_id: info.contract_version
                    for info in sorted(infos, key=lambda info: info.function_id)
                    if info.contract_version is not None
                },
            )
            for name, infos in sorted(grouped.items())
        ]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    message_id: str
    queue: str
    function_id: str
    payload: Any
    group: str | None
    attempts: int
    last_error: str


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Delivery policy of one queue.

    A failed delivery is retried after ``backoff_initial * 2**(attempt-1)`` seconds (capped at
    ``backoff_max``, with jitter) until ``max_deliveries``; then the message is dead-lettered.
    A handler still running after ``visibility_timeout`` loses its lease and the message is
    delivered again.
    """

    max_deliveries: int = 5
    visibility_timeout: float = 30.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    concurrency: int = 32


@dataclass(frozen=True, slots=True)
class StreamRetention:
    """How long a stream keeps records: ``max_age`` seconds and/or ``max_len`` per group."""

    max_age: float | None = None
    max_len: int | None = None


@dataclass(frozen=True, slots=True)
class ChannelRef:
    """A serializable reference to a channel's write end; pass it in a payload."""

    channel_id: str
    schema_version: int = 1

    def to_json(self) -> dict[str, Any]:
        return {"channel_id": self.channel_id, "schema_version": self.schema_version}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChannelRef:
        return cls(channel_id=str(data["channel_id"]), schema_version=int(data["schema_version"]))


class Registration(Protocol):
    """Handle of one function or trigger registration."""

    @property
    def id(self) -> str: ...

    async def unregister(self) -> None:
        """Remove this registration only (other replicas of the same id keep serving)."""
        ...


class Subscription(Protocol):
    """A live stream subscription; iterate it, close it when done."""

    def __aiter__(self) -> AsyncIterator[StreamRecord]: ...

    async def __anext__(self) -> StreamRecord: ...

    async def aclose(self) -> None: ...


class ChannelWriter(Protocol):
    async def send(self, frame: Any) -> None:
        """Send one JSON frame; waits while the reader is ``capacity`` frames behind."""
        ...

    async def close(self) -> None:
        """End the channel normally: the reader's iteration stops after the last frame."""
        ...

    async def abort(self, reason: str) -> None:
        """End the channel with an error: the reader gets :class:`ChannelAborted`."""
        ...


class Channel(Protocol):
    """The read end of a channel; ``ref`` is what the writer needs."""

    @property
    def ref(self) -> ChannelRef: ...

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def __anext__(self) -> Any: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Engine(Protocol):
    """The bus. See ``docs/engine.md`` for semantics every backend must keep."""

    atomic_transactions: bool
    """Whether :meth:`transaction` makes its writes all-or-nothing on this backend."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """A unit of work: the writes made inside it — by this task and by the handlers it
        triggers in this process — commit together when it ends, or not at all when it raises
        or loses a compare-and-set, where :attr:`atomic_transactions` holds; elsewhere each
        write is made at once, in order. Reads inside see the unit's own writes. Blocks nest
        (the inner joins the outer). Inside an atomic unit, ``append`` returns the sequence the
        record is expected to get: the record may get a later one if another writer appends to
        the same group before the unit ends."""
        ...

    # -- functions -------------------------------------------------------------------------
    async def register_function(
        self,
        function_id: str,
        handler: Handler,
        *,
        description: str = "",
        request_schema: dict[str, Any] | LazySchema | None = None,
        response_schema: dict[str, Any] | LazySchema | None = None,
        worker: str = "anonymous",
        hop: bool = False,
        version: str = "",
        contract_version: int | None = None,
    ) -> Registration:
        """Serve ``function_id`` with ``handler``. ``hop``: the function is a bus hop whose
        invocations open no span of their own while tracing makes spans for steps only (the
        trace context still passes through; see :mod:`tackroom.engine.tracing`). ``version``
        and ``contract_version`` are what the catalog announces: the serving worker's version
        and the ``schema_version`` of the contract the function keeps."""
        ...

    async def trigger(
        self, function_id: str, payload: Any = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> Any: ...

    async def list_functions(self) -> list[FunctionInfo]: ...

    async def list_workers(self) -> list[WorkerInfo]: ...

    # -- queues ----------------------------------------------------------------------------
    async def configure_queue(self, queue: str, config: QueueConfig) -> None: ...

    async def enqueue(
        self,
        function_id: str,
        payload: Any = None,
        *,
        queue: str = "default",
        group: str | None = None,
        dedupe_key: str | None = None,
    ) -> str:
        """Durably enqueue a call; returns the message id (the same id for a deduped repeat)."""
        ...

    async def list_dead_letters(self, queue: str) -> list[DeadLetter]: ...

    async def redrive(self, queue: str, *, message_ids: list[str] | None = None) -> int:
        """Put dead letters back on their queue with a fresh delivery count; returns how many."""
        ...

    # -- state -----------------------------------------------------------------------------
    async def get_state(self, scope: str, key: str) -> StateEntry | None: ...

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        """Write ``value``. ``expected_revision`` makes it compare-and-set (0: must be absent)."""
        ...

    async def update_state(self, scope: str, key: str, ops: list[UpdateOp]) -> StateEntry:
        """Apply ``ops`` atomically (an absent key starts as ``None``)."""
        ...

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool: ...

    async def list_state(self, scope: str, *, prefix: str = "") -> list[StateEntry]: ...

    # -- triggers --------------------------------------------------------------------------
    async def add_state_trigger(
        self, scope: str, function_id: str, *, worker: str = "anonymous"
    ) -> Registration:
        """Call ``function_id`` after every write in ``scope`` with old and new value."""
        ...

    async def add_stream_trigger(
        self, stream: str, function_id: str, *, worker: str = "anonymous"
    ) -> Registration:
        """Call ``function_id`` for every record appended to ``stream`` (any group)."""
        ...

    async def add_cron_trigger(
        self, schedule: str, function_id: str, *, worker: str = "anonymous"
    ) -> Registration:
        """Call ``function_id`` on a cron schedule (5 fields, or 6 with seconds first)."""
        ...

    # -- streams ---------------------------------------------------------------------------
    async def configure_stream(self, stream: str, retention: StreamRetention) -> None: ...

    async def append(self, stream: str, group_id: str, data: Any) -> int:
        """Append a record; returns its sequence, monotonic per ``(stream, group_id)``."""
        ...

    async def read(
        self, stream: str, group_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[StreamRecord]: ...

    async def subscribe(self, stream: str, group_id: str, *, after: int = 0) -> Subscription:
        """Records with ``seq > after``, first those stored, then live ones, none missed."""
        ...

    async def delete_group(self, stream: str, group_id: str) -> int:
        """Delete every stored record of one group; returns how many were deleted.

        The group's head is kept: a later append continues after the last sequence ever given,
        so a sequence is never reused. Idempotent (a second call deletes 0).
        """
        ...

    # -- live frames -----------------------------------------------------------------------
    async def publish(self, stream: str, group_id: str, data: Any) -> None:
        """Hand ``data`` to the group's subscriptions open now, as a ``live`` record.

        Never stored, never read back, never given to stream triggers; at most once (a
        subscription that falls behind may lose live records); not part of a
        :meth:`transaction` (it goes out at once). A subscription hands it out after every
        record this process appended to the group before publishing it.
        """
        ...

    def offer_snapshot(
        self, stream: str, group_id: str, provider: Callable[[], Any]
    ) -> AbstractAsyncContextManager[None]:
        """While the block runs, :meth:`snapshot` of the group includes ``provider()`` (a JSON
        value, computed when asked: what a reader that connects now has missed so far)."""
        ...

    async def snapshot(self, stream: str, group_id: str) -> list[StreamRecord]:
        """The values offered for the group now (:meth:`offer_snapshot`), as ``live`` records
        whose ``seq`` is the group's last stored sequence just before they were taken (the
        record they follow). Empty, at once, when nothing is offered."""
        ...

    # -- channels --------------------------------------------------------------------------
    async def open_channel(self, *, capacity: int = 64) -> Channel: ...

    def channel_writer(self, ref: ChannelRef) -> ChannelWriter: ...
