"""Functions the local endpoint serves itself: a stream subscription held for one connection.

A process attached through the endpoint (``RemoteBus``) follows a stream group the way an
``Engine.subscribe`` caller does — stored records after a cursor, then live frames (token
deltas), in order — by opening a subscription in the serving process and reading it in
batches::

    handle = await STREAM_OPEN.call(client, StreamOpenRequest(stream=..., group_id=..., after=0))
    batch = await STREAM_NEXT.call(client, StreamNextRequest(handle=handle.handle, wait=20))
    await STREAM_CLOSE.call(client, StreamCloseRequest(handle=handle.handle))

``next`` waits up to ``wait`` seconds for the first record, then answers with what the
subscription holds (at most ``limit`` records and one frame's bytes). A handle belongs to its
connection: it is closed when the connection closes, or after the endpoint's idle timeout with
no ``next``; using it then, or from another connection, fails with ``UnknownStreamHandle``. A
connection holds a bounded number of handles (``TooManyStreams`` past it). These ids are not on
the bus: only a local endpoint answers them.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tackroom.contracts._base import Strict
from tackroom.contracts.bus import Function

__all__ = [
    "ENDPOINT_SCHEMA_VERSION",
    "STREAM_CLOSE",
    "STREAM_NEXT",
    "STREAM_OPEN",
    "FollowedRecord",
    "StreamBatch",
    "StreamCloseRequest",
    "StreamClosed",
    "StreamHandle",
    "StreamNextRequest",
    "StreamOpenRequest",
]

ENDPOINT_SCHEMA_VERSION = 1

MAX_WAIT = 60.0
"""The longest ``next`` may wait for a record (seconds); a caller's timeout must exceed it."""


class _Model(Strict):
    schema_version: int = ENDPOINT_SCHEMA_VERSION


class StreamOpenRequest(_Model):
    stream: str = Field(min_length=1)
    group_id: str = Field(min_length=1)
    after: int = Field(default=0, ge=0, le=2**63 - 1)


class StreamHandle(_Model):
    handle: str


class StreamNextRequest(_Model):
    handle: str = Field(min_length=1)
    wait: float = Field(default=20.0, ge=0, le=MAX_WAIT)
    limit: int = Field(default=1000, ge=1, le=10_000)


class FollowedRecord(_Model):
    """A stored record, or (``live``) a frame published while it was followed, whose ``seq`` is
    that of the stored record before it (``StreamRecord``'s rule)."""

    seq: int
    data: Any
    timestamp: float
    live: bool = False


class StreamBatch(_Model):
    records: list[FollowedRecord]
    ended: bool = False
    """The subscription ended in the serving process (its engine is closing): nothing follows."""


class StreamCloseRequest(_Model):
    handle: str = Field(min_length=1)


class StreamClosed(_Model):
    closed: bool
    """Whether the handle was open (closing twice is not an error)."""


STREAM_OPEN: Function[StreamOpenRequest, StreamHandle] = Function(
    "endpoint::stream::open",
    StreamOpenRequest,
    StreamHandle,
    description="Subscribe, in the serving process, to a stream group after a sequence; the "
    "handle lives as long as this connection (or its idle timeout).",
)
STREAM_NEXT: Function[StreamNextRequest, StreamBatch] = Function(
    "endpoint::stream::next",
    StreamNextRequest,
    StreamBatch,
    description="The next records of an open subscription, stored and live in order; waits up "
    "to wait seconds for the first.",
)
STREAM_CLOSE: Function[StreamCloseRequest, StreamClosed] = Function(
    "endpoint::stream::close",
    StreamCloseRequest,
    StreamClosed,
    description="Close a subscription opened on this connection.",
)
