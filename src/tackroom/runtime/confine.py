"""Confined workers: what a third-party tool worker may do on the embedded bus.

On NATS the server enforces a ``tool`` user's permissions (``tackroom nats config``). In one
process there is no server between the workers, so the host hands a worker named in
``worker_grants`` a :class:`ConfinedEngine` instead of the engine: it may serve its own tools
(``tool::<name>``) and open channels to stream their results, and nothing else — no call of
another function (``approval::resolve`` included), no state, no queue, no stream, no trigger.
Each refusal is a :class:`~tackroom.engine.errors.PermissionDenied` in one line.

This confines a worker that goes through the engine it was given; Python code in the same
process can reach past it. A worker you do not trust belongs in a process of its own on NATS,
where the server confines it whatever its code does.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, NoReturn, Unpack

from pydantic import BaseModel, ConfigDict, Field

from tackroom.engine.errors import PermissionDenied
from tackroom.engine.protocol import (
    DEFAULT_TIMEOUT,
    Channel,
    ChannelRef,
    ChannelWriter,
    DeadLetter,
    Engine,
    EnqueueOptions,
    FunctionInfo,
    Handler,
    QueueConfig,
    RegisterOptions,
    Registration,
    StateEntry,
    StreamRecord,
    StreamRetention,
    Subscription,
    UpdateOp,
    WorkerInfo,
)

__all__ = ["ConfinedEngine", "WorkerGrant"]


class WorkerGrant(BaseModel):
    """``worker_grants.<worker>``: the one role a confined worker has, and its tools."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = 1
    role: Literal["tool"] = "tool"
    tools: list[str] = Field(
        min_length=1, description="the tool names it may serve, as tool::<name>"
    )

    def allows(self, function_id: str) -> bool:
        name = function_id.removeprefix("tool::")
        return function_id.startswith("tool::") and name in self.tools


class ConfinedEngine:
    """``engine`` as a worker holding ``grant`` may use it."""

    def __init__(self, engine: Engine, *, worker: str, grant: WorkerGrant) -> None:
        self._engine = engine
        self._worker = worker
        self._grant = grant
        self.atomic_transactions = engine.atomic_transactions

    def _refuse(self, what: str) -> NoReturn:
        tools = ", ".join(f"tool::{name}" for name in self._grant.tools)
        raise PermissionDenied(
            f"worker {self._worker!r} may only serve {tools} (worker_grants): it may not {what}"
        )

    async def start(self) -> None:
        self._refuse("start the engine")

    async def close(self) -> None:
        self._refuse("close the engine")

    def transaction(self) -> AbstractAsyncContextManager[None]:
        self._refuse("open a transaction")

    async def register_function(
        self, function_id: str, handler: Handler, **options: Unpack[RegisterOptions]
    ) -> Registration:
        if not self._grant.allows(function_id):
            self._refuse(f"serve {function_id}")
        return await self._engine.register_function(function_id, handler, **options)

    async def trigger(
        self, function_id: str, payload: Any = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        self._refuse(f"call {function_id}")

    async def list_functions(self) -> list[FunctionInfo]:
        self._refuse("read the function catalog")

    async def list_workers(self) -> list[WorkerInfo]:
        self._refuse("read the worker catalog")

    async def configure_queue(self, queue: str, config: QueueConfig) -> None:
        self._refuse(f"configure queue {queue}")

    async def enqueue(
        self,
        function_id: str,
        payload: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> str:
        self._refuse(f"enqueue a call of {function_id}")

    async def list_dead_letters(self, queue: str) -> list[DeadLetter]:
        self._refuse(f"read queue {queue}")

    async def redrive(self, queue: str, *, message_ids: list[str] | None = None) -> int:
        self._refuse(f"redrive queue {queue}")

    async def get_state(self, scope: str, key: str) -> StateEntry | None:
        self._refuse(f"read state {scope}")

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        self._refuse(f"write state {scope}")

    async def update_state(self, scope: str, key: str, ops: list[UpdateOp]) -> StateEntry:
        self._refuse(f"write state {scope}")

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool:
        self._refuse(f"delete state {scope}")

    async def list_state(self, scope: str, *, prefix: str = "") -> list[StateEntry]:
        self._refuse(f"read state {scope}")

    async def add_state_trigger(
        self, scope: str, function_id: str, *, worker: str = "anonymous"
    ) -> Registration:
        self._refuse(f"watch state {scope}")

    async def add_stream_trigger(
        self, stream: str, function_id: str, *, worker: str = "anonymous"
    ) -> Registration:
        self._refuse(f"watch stream {stream}")

    async def add_cron_trigger(
        self, schedule: str, function_id: str, *, worker: str = "anonymous"
    ) -> Registration:
        self._refuse("add a cron trigger")

    async def configure_stream(self, stream: str, retention: StreamRetention) -> None:
        self._refuse(f"configure stream {stream}")

    async def append(self, stream: str, group_id: str, data: Any) -> int:
        self._refuse(f"append to stream {stream}")

    async def read(
        self, stream: str, group_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[StreamRecord]:
        self._refuse(f"read stream {stream}")

    async def subscribe(self, stream: str, group_id: str, *, after: int = 0) -> Subscription:
        self._refuse(f"read stream {stream}")

    async def delete_group(self, stream: str, group_id: str) -> int:
        self._refuse(f"delete from stream {stream}")

    async def publish(self, stream: str, group_id: str, data: Any) -> None:
        self._refuse(f"publish to stream {stream}")

    def offer_snapshot(
        self, stream: str, group_id: str, provider: Callable[[], Any]
    ) -> AbstractAsyncContextManager[None]:
        self._refuse(f"offer snapshots of stream {stream}")

    async def snapshot(self, stream: str, group_id: str) -> list[StreamRecord]:
        self._refuse(f"read stream {stream}")

    async def open_channel(self, *, capacity: int = 64) -> Channel:
        return await self._engine.open_channel(capacity=capacity)

    def channel_writer(self, ref: ChannelRef) -> ChannelWriter:
        return self._engine.channel_writer(ref)
