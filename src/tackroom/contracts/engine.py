"""The built-in ``engine`` worker's public face: the engine's state, streams and catalog as
functions on the bus, for processes that hold only a bus connection (or a local endpoint client).

Engine errors come back as ``InvocationError`` whose ``remote_code`` is the engine's code
(``revision_conflict``, ``invalid_update``, ...); a request that does not validate fails with
``invalid_request``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function

__all__ = [
    "FUNCTIONS_LIST",
    "STATE_DELETE",
    "STATE_GET",
    "STATE_LIST",
    "STATE_SET",
    "STATE_UPDATE",
    "STREAM_APPEND",
    "STREAM_DELETE_GROUP",
    "STREAM_READ",
    "STREAM_SNAPSHOT",
    "WORKERS_LIST",
    "Deleted",
    "EmptyRequest",
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
    "StreamDeleteGroupRequest",
    "StreamDeleted",
    "StreamReadRequest",
    "StreamRecordItem",
    "StreamRecords",
    "StreamSnapshotRequest",
    "UpdateOpModel",
    "WorkerEntry",
    "WorkerList",
]


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


class _StreamGroup(_Model):
    stream: str = Field(min_length=1)
    group_id: str = Field(min_length=1)


class StreamAppendRequest(_StreamGroup):
    data: Any


class Seq(_Model):
    seq: int


class StreamReadRequest(_StreamGroup):
    after: int = Field(default=0, ge=0, le=2**63 - 1)  # a sequence number is a 64-bit integer
    limit: int = Field(default=1000, ge=1, le=10_000)


class StreamRecordItem(_Model):
    seq: int
    data: Any
    timestamp: float


class StreamRecords(_Model):
    records: list[StreamRecordItem]


class StreamSnapshotRequest(_StreamGroup):
    pass


class StreamDeleteGroupRequest(_StreamGroup):
    pass


class StreamDeleted(_Model):
    deleted: int


class FunctionEntry(_Model):
    function_id: str
    worker: str
    description: str
    request_schema: dict[str, Any] | None
    response_schema: dict[str, Any] | None
    version: str = ""
    """The serving worker's version (``""``: it announced none)."""
    contract_version: int | None = None
    """The ``schema_version`` of the contract the function keeps (``None``: none declared)."""


class FunctionList(_Model):
    functions: list[FunctionEntry]


class WorkerEntry(_Model):
    name: str
    functions: list[str]
    pid: int
    host: str
    version: str = ""
    """The worker's version as it announced it (``""``: none)."""
    contracts: dict[str, int] = Field(default={})
    """``function_id -> schema_version`` of each contract function it serves."""


class WorkerList(_Model):
    workers: list[WorkerEntry]


# -- the functions ---------------------------------------------------------------------------

STATE_GET: Function[StateGetRequest, StateValue | None] = Function(
    "state::get",
    StateGetRequest,
    StateValue | None,
    description="Read a state value and its revision (null when absent).",
)
STATE_SET: Function[StateSetRequest, Revision] = Function(
    "state::set",
    StateSetRequest,
    Revision,
    description="Write a state value; expected_revision makes it compare-and-set (0: must be "
    "absent).",
)
STATE_UPDATE: Function[StateUpdateRequest, StateValue] = Function(
    "state::update",
    StateUpdateRequest,
    StateValue,
    description="Apply set/merge/append/increment/remove ops atomically to a state value.",
)
STATE_DELETE: Function[StateDeleteRequest, Deleted] = Function(
    "state::delete",
    StateDeleteRequest,
    Deleted,
    description="Delete a state value, optionally only at an expected revision.",
)
STATE_LIST: Function[StateListRequest, StateList] = Function(
    "state::list",
    StateListRequest,
    StateList,
    description="List the values of a scope whose keys start with prefix, sorted by key.",
)
STREAM_APPEND: Function[StreamAppendRequest, Seq] = Function(
    "stream::append",
    StreamAppendRequest,
    Seq,
    description="Append a record to a stream group; returns its sequence.",
)
STREAM_READ: Function[StreamReadRequest, StreamRecords] = Function(
    "stream::read",
    StreamReadRequest,
    StreamRecords,
    description="Read up to limit records of a stream group after a sequence.",
)
STREAM_SNAPSHOT: Function[StreamSnapshotRequest, StreamRecords] = Function(
    "stream::snapshot",
    StreamSnapshotRequest,
    StreamRecords,
    description="What a reader joining a stream group now has missed of what is streaming (a "
    "message's text so far): the values offered for the group, each with the sequence of the "
    "last stored record before it; empty when nothing is offered.",
)
STREAM_DELETE_GROUP: Function[StreamDeleteGroupRequest, StreamDeleted] = Function(
    "stream::delete_group",
    StreamDeleteGroupRequest,
    StreamDeleted,
    description="Delete every record of a stream group (its sequence numbers are never reused); "
    "returns how many were deleted.",
)
FUNCTIONS_LIST: Function[EmptyRequest, FunctionList] = Function(
    "engine::functions::list",
    EmptyRequest,
    FunctionList,
    description="The function catalog: ids, workers, descriptions and JSON schemas.",
)
WORKERS_LIST: Function[EmptyRequest, WorkerList] = Function(
    "engine::workers::list",
    EmptyRequest,
    WorkerList,
    description="The workers on the bus and the function ids each serves.",
)
