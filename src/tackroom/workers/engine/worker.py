"""The built-in ``engine`` worker: the engine's own state, streams and catalog on the bus.

Processes that only hold a bus connection (or a local endpoint client) reach state and streams
through these function ids instead of the ``Engine`` methods. Engine errors come back as
``FunctionError`` with the engine's code (``revision_conflict``, ``invalid_update``, ...); a
request that does not validate fails with ``invalid_request``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from tackroom.engine.errors import EngineError, FunctionError
from tackroom.engine.protocol import UpdateOp
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = [
    "WORKER",
    "Deleted",
    "EmptyRequest",
    "EngineWorkerConfig",
    "FunctionEntry",
    "FunctionList",
    "Revision",
    "Seq",
    "StateDeleteRequest",
    "StateGetRequest",
    "StateItem",
    "StateList",
    "StateListRequest",
    "StateSetRequest",
    "StateUpdateRequest",
    "StateValue",
    "StreamAppendRequest",
    "StreamReadRequest",
    "StreamRecordItem",
    "StreamRecords",
    "UpdateOpModel",
    "WorkerEntry",
    "WorkerList",
]

RequestT = TypeVar("RequestT", bound=BaseModel)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineWorkerConfig(WorkerConfig):
    """The ``engine`` worker takes no options yet."""


class EmptyRequest(_Model):
    pass


class _StateKey(_Model):
    scope: str = Field(min_length=1)
    key: str = Field(min_length=1)


class StateGetRequest(_StateKey):
    pass


class StateValue(_Model):
    value: Any
    revision: int


class StateSetRequest(_StateKey):
    value: Any
    expected_revision: int | None = Field(default=None, ge=0)


class Revision(_Model):
    revision: int


class UpdateOpModel(_Model):
    op: Literal["set", "merge", "append", "increment", "remove"]
    path: list[str] = Field(default_factory=list)
    value: Any = None


class StateUpdateRequest(_StateKey):
    ops: list[UpdateOpModel]


class StateDeleteRequest(_StateKey):
    expected_revision: int | None = Field(default=None, ge=0)


class Deleted(_Model):
    deleted: bool


class StateListRequest(_Model):
    scope: str = Field(min_length=1)
    prefix: str = ""


class StateItem(_Model):
    key: str
    value: Any
    revision: int


class StateList(_Model):
    items: list[StateItem]


class StreamAppendRequest(_Model):
    stream: str = Field(min_length=1)
    group_id: str = Field(min_length=1)
    data: Any


class Seq(_Model):
    seq: int


class StreamReadRequest(_Model):
    stream: str = Field(min_length=1)
    group_id: str = Field(min_length=1)
    after: int = Field(default=0, ge=0)
    limit: int = Field(default=1000, ge=1, le=10_000)


class StreamRecordItem(_Model):
    seq: int
    data: Any
    timestamp: float


class StreamRecords(_Model):
    records: list[StreamRecordItem]


class FunctionEntry(_Model):
    function_id: str
    worker: str
    description: str
    request_schema: dict[str, Any] | None
    response_schema: dict[str, Any] | None


class FunctionList(_Model):
    functions: list[FunctionEntry]


class WorkerEntry(_Model):
    name: str
    functions: list[str]
    pid: int
    host: str


class WorkerList(_Model):
    workers: list[WorkerEntry]


def _engine_errors_as_function_errors(
    handler: Callable[[RequestT], Awaitable[Any]],
) -> Callable[[RequestT], Awaitable[Any]]:
    @functools.wraps(handler)
    async def run(request: RequestT) -> Any:
        try:
            return await handler(request)
        except FunctionError:
            raise
        except EngineError as exc:
            raise FunctionError(exc.code, exc.message) from exc

    return run


async def _start(ctx: WorkerContext[EngineWorkerConfig]) -> None:
    engine = ctx.engine

    async def state_get(request: StateGetRequest) -> StateValue | None:
        entry = await engine.get_state(request.scope, request.key)
        return None if entry is None else StateValue(value=entry.value, revision=entry.revision)

    async def state_set(request: StateSetRequest) -> Revision:
        entry = await engine.set_state(
            request.scope, request.key, request.value, expected_revision=request.expected_revision
        )
        return Revision(revision=entry.revision)

    async def state_update(request: StateUpdateRequest) -> StateValue:
        ops = [cast(UpdateOp, op.model_dump(mode="json", exclude_unset=True)) for op in request.ops]
        entry = await engine.update_state(request.scope, request.key, ops)
        return StateValue(value=entry.value, revision=entry.revision)

    async def state_delete(request: StateDeleteRequest) -> Deleted:
        deleted = await engine.delete_state(
            request.scope, request.key, expected_revision=request.expected_revision
        )
        return Deleted(deleted=deleted)

    async def state_list(request: StateListRequest) -> StateList:
        entries = await engine.list_state(request.scope, prefix=request.prefix)
        return StateList(
            items=[StateItem(key=e.key, value=e.value, revision=e.revision) for e in entries]
        )

    async def stream_append(request: StreamAppendRequest) -> Seq:
        return Seq(seq=await engine.append(request.stream, request.group_id, request.data))

    async def stream_read(request: StreamReadRequest) -> StreamRecords:
        records = await engine.read(
            request.stream, request.group_id, after=request.after, limit=request.limit
        )
        return StreamRecords(
            records=[
                StreamRecordItem(seq=r.seq, data=r.data, timestamp=r.timestamp) for r in records
            ]
        )

    async def functions_list(request: EmptyRequest) -> FunctionList:
        infos = await engine.list_functions()
        return FunctionList(
            functions=[
                FunctionEntry(
                    function_id=i.function_id,
                    worker=i.worker,
                    description=i.description,
                    request_schema=i.request_schema,
                    response_schema=i.response_schema,
                )
                for i in infos
            ]
        )

    async def workers_list(request: EmptyRequest) -> WorkerList:
        infos = await engine.list_workers()
        return WorkerList(
            workers=[
                WorkerEntry(name=w.name, functions=w.functions, pid=w.pid, host=w.host)
                for w in infos
            ]
        )

    table: list[tuple[str, Callable[[Any], Awaitable[Any]], type[BaseModel], Any, str]] = [
        ("state::get", state_get, StateGetRequest, StateValue | None,
         "Read a state value and its revision (null when absent)."),
        ("state::set", state_set, StateSetRequest, Revision,
         "Write a state value; expected_revision makes it compare-and-set (0: must be absent)."),
        ("state::update", state_update, StateUpdateRequest, StateValue,
         "Apply set/merge/append/increment/remove ops atomically to a state value."),
        ("state::delete", state_delete, StateDeleteRequest, Deleted,
         "Delete a state value, optionally only at an expected revision."),
        ("state::list", state_list, StateListRequest, StateList,
         "List the values of a scope whose keys start with prefix, sorted by key."),
        ("stream::append", stream_append, StreamAppendRequest, Seq,
         "Append a record to a stream group; returns its sequence."),
        ("stream::read", stream_read, StreamReadRequest, StreamRecords,
         "Read up to limit records of a stream group after a sequence."),
        ("engine::functions::list", functions_list, EmptyRequest, FunctionList,
         "The function catalog: ids, workers, descriptions and JSON schemas."),
        ("engine::workers::list", workers_list, EmptyRequest, WorkerList,
         "The workers on the bus and the function ids each serves."),
    ]  # fmt: skip
    for function_id, handler, request_model, response_type, description in table:
        await ctx.register_typed_function(
            function_id,
            _engine_errors_as_function_errors(handler),
            request_model=request_model,
            response_type=response_type,
            description=description,
        )


WORKER = WorkerSpec(
    name="engine",
    description="The engine's state, streams and catalog as functions on the bus.",
    config_model=EngineWorkerConfig,
    start=_start,
)
