"""The ``Engine`` protocol: the one bus every worker talks through, and its parts.

Every backend (``embedded``, ``nats``) implements ``Engine`` and passes the one conformance
suite in ``tests/conformance``. Payloads, results, state values and stream records are JSON
values; a pydantic model given as a payload is serialized at the edge.

``Engine`` is composed of parts — :class:`Caller`, :class:`Functions`, :class:`Queues`,
:class:`StateBackend`, :class:`Triggers`, :class:`Appender`, :class:`Streams`,
:class:`LiveFrames`, :class:`Channels`, :class:`Transactions`, :class:`Lifecycle` — and code
that needs only some of the bus asks for those parts (``StateBackend``, or a protocol composed
of parts), so a client of an engine, a wrapper or a test fake that offers them serves as well.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar, Unpack, runtime_checkable

from tackroom.engine.values import (
    DEFAULT_TIMEOUT,
    ChannelRef,
    DeadLetter,
    EnqueueOptions,
    FunctionInfo,
    Handler,
    Invocation,
    InvocationKind,
    LazySchema,
    QueueConfig,
    RegisterOptions,
    ServeOptions,
    StateEntry,
    StreamRecord,
    StreamRetention,
    UpdateOp,
    WorkerInfo,
    current_invocation,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "Appender",
    "Caller",
    "Channel",
    "ChannelRef",
    "ChannelWriter",
    "Channels",
    "DeadLetter",
    "Engine",
    "EnqueueOptions",
    "FunctionInfo",
    "Functions",
    "Handler",
    "Invocation",
    "InvocationKind",
    "LazySchema",
    "Lifecycle",
    "LiveFrames",
    "QueueConfig",
    "Queues",
    "RegisterOptions",
    "Registration",
    "Running",
    "ServeOptions",
    "StateBackend",
    "StateEntry",
    "StreamRecord",
    "StreamRetention",
    "Streams",
    "Subscription",
    "Transactions",
    "Triggers",
    "UpdateOp",
    "WorkerInfo",
    "current_invocation",
    "journal",
]

T = TypeVar("T")


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


class Lifecycle(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


class Running(Lifecycle):
    """A :class:`Lifecycle` that is its own async context manager: ``async with`` starts it,
    gives it, and closes it at the end of the block."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class Transactions(Protocol):
    """Units of work. Code that commits a record with what it implies writes one shape on
    every backend: the record carries :func:`journal` of its effects and the effects are
    applied inside the same :meth:`transaction` — one commit where it is atomic, the record's
    compare-and-set first and then each effect in order elsewhere, a reader that finds a
    journal applying it again (each effect idempotent)."""

    @property
    def atomic_transactions(self) -> bool:
        """Whether :meth:`transaction` makes its writes all-or-nothing on this backend."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """A unit of work: the writes made inside it — by this task and by the handlers it
        triggers in this process — commit together when it ends, or not at all when it raises
        or loses a compare-and-set, where :attr:`atomic_transactions` holds; elsewhere each
        write is made at once, in order. Reads inside see the unit's own writes. Blocks nest
        (the inner joins the outer). Inside an atomic unit, ``append`` returns the sequence the
        record is expected to get: the record may get a later one if another writer appends to
        the same group before the unit ends."""
        ...


class Caller(Protocol):
    """What calling a function needs: an ``Engine``, or a client of one (a local endpoint)."""

    async def trigger(
        self, function_id: str, payload: Any = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> Any: ...


class Functions(Caller, Protocol):
    async def register_function(
        self,
        function_id: str,
        handler: Handler,
        **options: Unpack[RegisterOptions],
    ) -> Registration:
        """Serve ``function_id`` with ``handler``; ``options`` are :class:`RegisterOptions`.
        ``hop``: the function is a bus hop whose invocations open no span of their own while
        tracing makes spans for steps only (the trace context still passes through; see
        :mod:`tackroom.engine.tracing`). ``version`` and ``contract_version`` are what the
        catalog announces: the serving worker's version and the ``schema_version`` of the
        contract the function keeps."""
        ...

    async def list_functions(self) -> list[FunctionInfo]: ...

    async def list_workers(self) -> list[WorkerInfo]: ...


class Queues(Protocol):
    async def configure_queue(self, queue: str, config: QueueConfig) -> None: ...

    async def enqueue(
        self,
        function_id: str,
        payload: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> str:
        """Durably enqueue a call; returns the message id (the same id for a deduped repeat)."""
        ...

    async def list_dead_letters(self, queue: str) -> list[DeadLetter]: ...

    async def redrive(self, queue: str, *, message_ids: list[str] | None = None) -> int:
        """Put dead letters back on their queue with a fresh delivery count; returns how many."""
        ...


class StateBackend(Protocol):
    """The engine's state: values by scope and key, each with a revision."""

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


class Triggers(Protocol):
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


class Appender(Protocol):
    async def append(self, stream: str, group_id: str, data: Any) -> int:
        """Append a record; returns its sequence, monotonic per ``(stream, group_id)``."""
        ...


class Streams(Appender, Protocol):
    async def configure_stream(self, stream: str, retention: StreamRetention) -> None: ...

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


class LiveFrames(Protocol):
    """Frames for the readers connected now, never stored."""

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


class Channels(Protocol):
    async def open_channel(self, *, capacity: int = 64) -> Channel: ...

    def channel_writer(self, ref: ChannelRef) -> ChannelWriter: ...


@runtime_checkable
class Engine(
    Lifecycle,
    Transactions,
    Functions,
    Queues,
    StateBackend,
    Triggers,
    Streams,
    LiveFrames,
    Channels,
    Protocol,
):
    """The bus: every part. See ``docs/engine.md`` for semantics every backend must keep."""


def journal(engine: Transactions, effects: list[T]) -> list[T]:
    """What a record committed in a unit of work must carry of the ``effects`` the unit applies
    after writing it: none where :meth:`~Transactions.transaction` is atomic (the effects
    commit with the record, or nothing does), all of them elsewhere (a crash after the record's
    compare-and-set leaves them there, for the next reader to apply)."""
    return [] if engine.atomic_transactions else list(effects)
