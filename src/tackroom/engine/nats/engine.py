"""The NATS JetStream engine: many processes, one bus. See ``docs/nats.md`` for the mapping."""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Unpack

import nats.errors
import nats.js.errors

from tackroom.engine.errors import EngineClosed, EngineUnavailable, PermissionDenied
from tackroom.engine.functions import FunctionRegistry, LocalRegistration, new_registration
from tackroom.engine.nats.calls import FunctionCalls
from tackroom.engine.nats.catalog import Catalog
from tackroom.engine.nats.channels import (
    LocalNatsChannelWriter,
    NatsChannel,
    NatsChannelWriter,
)
from tackroom.engine.nats.delivery import Dispatcher
from tackroom.engine.nats.link import Link, WrongLastSequence, unavailable
from tackroom.engine.nats.live import LiveFrames
from tackroom.engine.nats.namespace import bucket_configs, stream_configs
from tackroom.engine.nats.naming import Names, NatsOptions, parse_nats_url
from tackroom.engine.nats.queues import QueueBroker
from tackroom.engine.nats.state import StateStore
from tackroom.engine.nats.streams import EventStreams, NatsSubscription
from tackroom.engine.nats.triggers import Triggers
from tackroom.engine.protocol import (
    DEFAULT_TIMEOUT,
    ChannelRef,
    DeadLetter,
    EnqueueOptions,
    FunctionInfo,
    Handler,
    QueueConfig,
    RegisterOptions,
    Running,
    StateEntry,
    StreamRecord,
    StreamRetention,
    UpdateOp,
    WorkerInfo,
)
from tackroom.engine.tracing import EngineTracer, SpanMode
from tackroom.engine.values import enqueue_target

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["NAMESPACE_SCHEMA_VERSION", "NatsEngine"]

NAMESPACE_SCHEMA_VERSION = 1
_STREAM_EXISTS = 10058  # "stream name already in use with a different configuration"


class _Parts:
    """The components of a started engine (absent before ``start`` and after ``close``)."""

    def __init__(self, link: Link, engine: NatsEngine, partitions: int) -> None:
        names, registry, capture = engine.names, engine.registry, engine.capture
        self.link = link
        self.catalog = Catalog(
            link,
            names,
            heartbeat=link.options.heartbeat,
            functions=registry.functions,
            triggers=lambda: self.triggers.held(),
        )
        self.calls = FunctionCalls(link, names, registry, self.catalog, tracer=engine.tracer)
        self.dispatcher = Dispatcher(
            link,
            names,
            registry,
            partitions=partitions,
            config=lambda queue: self.broker.config(queue),
            bury=lambda held, attempts, error: self.broker.bury(held, attempts, error),
        )
        self.broker = QueueBroker(
            link, names, self.dispatcher, partitions=partitions, capture=capture
        )
        self.state = StateStore(link, names, capture=lambda: capture(None))
        self.streams = EventStreams(link, names, capture=lambda: capture(None))
        self.live = LiveFrames(link, names, self.streams)
        self.triggers = Triggers(link, names, self.broker, self.streams, self.catalog)
        self.channels: weakref.WeakSet[NatsChannel] = weakref.WeakSet()
        self.local_channels: weakref.WeakValueDictionary[str, NatsChannel] = (
            weakref.WeakValueDictionary()
        )


def _partitions(namespace: str, record: dict[str, Any] | None) -> int:
    if record is None:
        raise EngineUnavailable(
            f"namespace {namespace} does not exist yet: start a process allowed to create it"
            " (a harness) first; this URL says provision=0"
        )
    if record.get("schema_version") != NAMESPACE_SCHEMA_VERSION:
        raise EngineClosed(f"namespace {namespace}: schema {record.get('schema_version')}")
    return int(record["partitions"])


class NatsEngine(Running):
    """``Engine`` over NATS JetStream; build it with ``open_engine("nats://host:port")``."""

    atomic_transactions = False
    """JetStream has no transaction over several keys and streams: each write lands at once."""

    def __init__(
        self,
        *,
        options: NatsOptions,
        tracer_provider: TracerProvider | None = None,
        trace_spans: SpanMode = "steps",
    ) -> None:
        self.options = options
        self.names = Names(options.namespace)
        self.tracer = (
            None if tracer_provider is None else EngineTracer(tracer_provider, spans=trace_spans)
        )
        self.registry = FunctionRegistry(tracer=self.tracer)
        self._parts: _Parts | None = None

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        tracer_provider: TracerProvider | None = None,
        trace_spans: SpanMode = "steps",
    ) -> NatsEngine:
        return cls(
            options=parse_nats_url(url), tracer_provider=tracer_provider, trace_spans=trace_spans
        )

    def capture(self, payload: Any) -> dict[str, str] | None:
        return None if self.tracer is None else self.tracer.capture(payload)

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Groups writes without making them atomic (see :attr:`atomic_transactions`)."""
        return contextlib.nullcontext()

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        if self._parts is not None:
            return
        link = Link(self.options)
        await link.open()
        try:
            partitions = await self._provision(link)
            parts = _Parts(link, self, partitions)
            await parts.broker.start()
            await parts.catalog.publish()
            parts.catalog.start()
        except BaseException:
            await link.close()
            raise
        self._parts = parts

    async def _provision(self, link: Link) -> int:
        """Create the namespace's buckets and streams (idempotent); returns its partitions.

        With ``provision=0`` in the URL (a user the server lets create nothing), the namespace
        is only read: it must exist."""
        js, names, options = link.js, self.names, self.options
        if not options.provision:
            return _partitions(names.ns, await self._namespace_record(link))

        async def ensure(coro: Awaitable[object]) -> None:
            try:
                await coro
            except nats.js.errors.BadRequestError as exc:
                if exc.err_code != _STREAM_EXISTS:
                    raise
            except nats.errors.TimeoutError:
                if any(s.startswith("$js.api.stream.create.") for _, s in link.refused):
                    raise PermissionDenied(
                        f"NATS refused this user the creation of namespace {names.ns}'s streams:"
                        " add provision=0 to the URL (the namespace must exist)"
                    ) from None
                raise

        await asyncio.gather(
            *(ensure(js.create_key_value(config)) for config in bucket_configs(names, options)),
            *(ensure(js.add_stream(config)) for config in stream_configs(names, options)),
        )
        subject = f"$KV.{names.meta_bucket}.namespace"
        record = {"schema_version": NAMESPACE_SCHEMA_VERSION, "partitions": options.partitions}
        try:
            await link.js_publish(
                subject,
                json.dumps(record).encode(),
                headers={"Nats-Expected-Last-Subject-Sequence": "0"},
            )
        except WrongLastSequence:
            record = await self._namespace_record(link) or record
        return _partitions(names.ns, record)

    async def _namespace_record(self, link: Link) -> dict[str, Any] | None:
        names = self.names
        stored = await link.last_message(
            f"KV_{names.meta_bucket}", f"$KV.{names.meta_bucket}.namespace"
        )
        return None if stored is None else dict(json.loads(stored.data))

    async def close(self) -> None:
        parts, self._parts = self._parts, None
        if parts is None:
            return
        try:
            await parts.triggers.close()
            await parts.dispatcher.close()
            await parts.calls.close()
            for channel in list(parts.channels):
                await channel.aclose()
            with contextlib.suppress(Exception):  # unreachable: the entry expires by itself
                await parts.catalog.remove()
        finally:
            await parts.link.close()

    @asynccontextmanager
    async def _live(self) -> AsyncIterator[_Parts]:
        parts = self._parts
        if parts is None:
            raise EngineClosed("the engine is not running")
        try:
            yield parts
        except nats.errors.Error as exc:
            raise unavailable(exc) from None

    # -- functions -------------------------------------------------------------------------
    async def register_function(
        self, function_id: str, handler: Handler, **options: Unpack[RegisterOptions]
    ) -> LocalRegistration:
        registration = new_registration(
            function_id, handler, on_unregister=self._unregister_function, **options
        )
        async with self._live() as parts:
            self.registry.add(registration)
            await parts.calls.serve(function_id)
            await parts.catalog.publish()
            parts.dispatcher.served(function_id)
        return registration

    async def _unregister_function(self, registration: LocalRegistration) -> None:
        self.registry.remove(registration)
        async with self._live() as parts:
            if registration.function_id not in self.registry:
                await parts.calls.unserve(registration.function_id)
                await parts.dispatcher.unserved(registration.function_id)
            await parts.catalog.publish()

    async def trigger(
        self, function_id: str, payload: Any = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        async with self._live() as parts:
            return await parts.calls.trigger(function_id, payload, timeout=timeout)

    async def list_functions(self) -> list[FunctionInfo]:
        async with self._live() as parts:
            return await parts.catalog.functions()

    async def list_workers(self) -> list[WorkerInfo]:
        async with self._live() as parts:
            return await parts.catalog.workers()

    # -- queues ----------------------------------------------------------------------------
    async def configure_queue(self, queue: str, config: QueueConfig) -> None:
        async with self._live() as parts:
            await parts.broker.configure(queue, config)

    async def enqueue(
        self,
        function_id: str,
        payload: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> str:
        async with self._live() as parts:
            queue, group, dedupe_key = enqueue_target(options)
            return await parts.broker.enqueue(
                function_id, payload, queue=queue, group=group, dedupe_key=dedupe_key
            )

    async def list_dead_letters(self, queue: str) -> list[DeadLetter]:
        async with self._live() as parts:
            return await parts.broker.dead_letters(queue)

    async def redrive(self, queue: str, *, message_ids: list[str] | None = None) -> int:
        async with self._live() as parts:
            return await parts.broker.redrive(queue, message_ids)

    # -- state -----------------------------------------------------------------------------
    async def get_state(self, scope: str, key: str) -> StateEntry | None:
        async with self._live() as parts:
            return await parts.state.get(scope, key)

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        async with self._live() as parts:
            return await parts.state.set(scope, key, value, expected_revision=expected_revision)

    async def update_state(self, scope: str, key: str, ops: list[UpdateOp]) -> StateEntry:
        async with self._live() as parts:
            return await parts.state.update(scope, key, ops)

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool:
        async with self._live() as parts:
            return await parts.state.delete(scope, key, expected_revision=expected_revision)

    async def list_state(self, scope: str, *, prefix: str = "") -> list[StateEntry]:
        async with self._live() as parts:
            return await parts.state.entries(scope, prefix)

    # -- triggers --------------------------------------------------------------------------
    async def add_state_trigger(
        self, scope: str, function_id: str, *, worker: str = "anonymous"
    ) -> LocalRegistration:
        async with self._live() as parts:
            return await parts.triggers.add("state", scope, function_id, worker)

    async def add_stream_trigger(
        self, stream: str, function_id: str, *, worker: str = "anonymous"
    ) -> LocalRegistration:
        async with self._live() as parts:
            return await parts.triggers.add("stream", stream, function_id, worker)

    async def add_cron_trigger(
        self, schedule: str, function_id: str, *, worker: str = "anonymous"
    ) -> LocalRegistration:
        async with self._live() as parts:
            return parts.triggers.add_cron(schedule, function_id, worker)

    # -- streams ---------------------------------------------------------------------------
    async def configure_stream(self, stream: str, retention: StreamRetention) -> None:
        async with self._live() as parts:
            await parts.streams.configure(stream, retention)

    async def append(self, stream: str, group_id: str, data: Any) -> int:
        async with self._live() as parts:
            return await parts.streams.append(stream, group_id, data)

    async def read(
        self, stream: str, group_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[StreamRecord]:
        async with self._live() as parts:
            return await parts.streams.read(stream, group_id, after=after, limit=limit)

    async def subscribe(self, stream: str, group_id: str, *, after: int = 0) -> NatsSubscription:
        async with self._live() as parts:
            return await parts.streams.subscribe(stream, group_id, after=after)

    async def delete_group(self, stream: str, group_id: str) -> int:
        async with self._live() as parts:
            return await parts.streams.delete_group(stream, group_id)

    # -- live frames -----------------------------------------------------------------------
    async def publish(self, stream: str, group_id: str, data: Any) -> None:
        async with self._live() as parts:
            await parts.live.publish(stream, group_id, data)

    @asynccontextmanager
    async def offer_snapshot(
        self, stream: str, group_id: str, provider: Callable[[], Any]
    ) -> AsyncIterator[None]:
        async with self._live() as parts:
            offer = parts.live.offer(stream, group_id, provider)
        async with offer:
            yield

    async def snapshot(self, stream: str, group_id: str) -> list[StreamRecord]:
        async with self._live() as parts:
            return await parts.live.snapshot(stream, group_id)

    # -- channels --------------------------------------------------------------------------
    async def open_channel(self, *, capacity: int = 64) -> NatsChannel:
        async with self._live() as parts:
            channel = NatsChannel(parts.link, self.names, capacity=capacity)
            await channel.open()
            parts.channels.add(channel)
            parts.local_channels[channel.ref.channel_id] = channel
            return channel

    def channel_writer(self, ref: ChannelRef) -> NatsChannelWriter | LocalNatsChannelWriter:
        if self._parts is None:
            raise EngineClosed("the engine is not running")
        local = self._parts.local_channels.get(ref.channel_id)
        if local is not None:  # its reader is in this process: no round trip per frame
            return LocalNatsChannelWriter(local)
        return NatsChannelWriter(self._parts.link, self.names, ref)
