"""The values the ``Engine`` protocol speaks in: state entries, stream records, catalog
entries, queue and stream policies, channel references, the running invocation.

Import them from :mod:`tackroom.engine.protocol` (or :mod:`tackroom.engine`), which re-exports
them beside the protocol.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

__all__ = [
    "DEFAULT_TIMEOUT",
    "ChannelRef",
    "DeadLetter",
    "FunctionInfo",
    "Handler",
    "Invocation",
    "InvocationKind",
    "LazySchema",
    "QueueConfig",
    "RegisterOptions",
    "ServeOptions",
    "StateEntry",
    "StreamRecord",
    "StreamRetention",
    "UpdateOp",
    "WorkerInfo",
    "current_invocation",
    "reset_invocation",
    "set_current_invocation",
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


class ServeOptions(TypedDict, total=False):
    """What ``register_function`` is told of the function it serves: its catalog ``description``
    (default ``""``), ``request_schema`` and ``response_schema`` (``None``), whether it is a bus
    ``hop`` (``False``), and the ``contract_version`` it keeps (``None``)."""

    description: str
    request_schema: dict[str, Any] | LazySchema | None
    response_schema: dict[str, Any] | LazySchema | None
    hop: bool
    contract_version: int | None


class RegisterOptions(ServeOptions, total=False):
    """The keyword options of ``register_function``: :class:`ServeOptions`, and who serves it —
    the ``worker`` (default ``"anonymous"``) and that worker's ``version`` (``""``)."""

    worker: str
    version: str


class EnqueueOptions(TypedDict, total=False):
    """The keyword options of ``enqueue``: the ``queue`` (default ``"default"``), the ordering
    ``group`` (``None``: any order) and a ``dedupe_key`` (``None``: every call is new)."""

    queue: str
    group: str | None
    dedupe_key: str | None


def enqueue_target(options: EnqueueOptions) -> tuple[str, str | None, str | None]:
    """``(queue, group, dedupe_key)`` of ``options``, with the defaults filled in."""
    return options.get("queue", "default"), options.get("group"), options.get("dedupe_key")


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
