"""The built-in ``engine`` worker: the engine's own state, streams and catalog on the bus.

Processes that only hold a bus connection (or a local endpoint client) reach state and streams
through these functions (``tackroom.contracts.engine``) instead of the ``Engine`` methods. Engine
errors come back as ``FunctionError`` with the engine's code (``revision_conflict``,
``invalid_update``, ...); a request that does not validate fails with ``invalid_request``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

from pydantic import BaseModel

from tackroom.contracts.engine import (
    FUNCTIONS_LIST,
    STATE_DELETE,
    STATE_GET,
    STATE_LIST,
    STATE_SET,
    STATE_UPDATE,
    STREAM_APPEND,
    STREAM_DELETE_GROUP,
    STREAM_READ,
    STREAM_SNAPSHOT,
    WORKERS_LIST,
    Deleted,
    EmptyRequest,
    FunctionEntry,
    FunctionList,
    Revision,
    Seq,
    StateDeleteRequest,
    StateGetRequest,
    StateItem,
    StateList,
    StateListRequest,
    StateSetRequest,
    StateUpdateRequest,
    StateValue,
    StreamAppendRequest,
    StreamDeleted,
    StreamDeleteGroupRequest,
    StreamReadRequest,
    StreamRecordItem,
    StreamRecords,
    StreamSnapshotRequest,
    WorkerEntry,
    WorkerList,
)
from tackroom.engine.errors import EngineError, FunctionError
from tackroom.engine.protocol import StreamRecord, UpdateOp
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = ["WORKER", "EngineWorkerConfig"]

RequestT = TypeVar("RequestT", bound=BaseModel)
ResponseT = TypeVar("ResponseT")


class EngineWorkerConfig(WorkerConfig):
    """The ``engine`` worker takes no options yet."""


def _engine_errors_as_function_errors(
    handler: Callable[[RequestT], Awaitable[ResponseT]],
) -> Callable[[RequestT], Awaitable[ResponseT]]:
    @functools.wraps(handler)
    async def run(request: RequestT) -> ResponseT:
        try:
            return await handler(request)
        except FunctionError:
            raise
        except EngineError as exc:
            raise FunctionError(exc.code, exc.message) from exc

    return run


def _records(records: list[StreamRecord]) -> StreamRecords:
    return StreamRecords(
        records=[StreamRecordItem(seq=r.seq, data=r.data, timestamp=r.timestamp) for r in records]
    )


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
        return _records(records)

    async def stream_snapshot(request: StreamSnapshotRequest) -> StreamRecords:
        return _records(await engine.snapshot(request.stream, request.group_id))

    async def stream_delete_group(request: StreamDeleteGroupRequest) -> StreamDeleted:
        return StreamDeleted(deleted=await engine.delete_group(request.stream, request.group_id))

    async def functions_list(request: EmptyRequest) -> FunctionList:
        infos = await engine.list_functions()
        return FunctionList(
            functions=[FunctionEntry.model_validate(i, from_attributes=True) for i in infos]
        )

    async def workers_list(request: EmptyRequest) -> WorkerList:
        infos = await engine.list_workers()
        return WorkerList(
            workers=[WorkerEntry.model_validate(w, from_attributes=True) for w in infos]
        )

    wrap = _engine_errors_as_function_errors
    await ctx.serve(STATE_GET, wrap(state_get))
    await ctx.serve(STATE_SET, wrap(state_set))
    await ctx.serve(STATE_UPDATE, wrap(state_update))
    await ctx.serve(STATE_DELETE, wrap(state_delete))
    await ctx.serve(STATE_LIST, wrap(state_list))
    await ctx.serve(STREAM_APPEND, wrap(stream_append))
    await ctx.serve(STREAM_READ, wrap(stream_read))
    await ctx.serve(STREAM_SNAPSHOT, wrap(stream_snapshot))
    await ctx.serve(STREAM_DELETE_GROUP, wrap(stream_delete_group))
    await ctx.serve(FUNCTIONS_LIST, wrap(functions_list))
    await ctx.serve(WORKERS_LIST, wrap(workers_list))


WORKER = WorkerSpec(
    name="engine",
    description="The engine's state, streams and catalog as functions on the bus.",
    config_model=EngineWorkerConfig,
    start=_start,
)
