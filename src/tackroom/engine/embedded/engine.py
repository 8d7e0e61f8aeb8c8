"""The embedded engine: in-process asyncio, durable in one SQLite file."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from tackroom.engine.cron import CronSchedule, cron_registration
from tackroom.engine.embedded.commits import GroupCommitter, Notice, Pending
from tackroom.engine.embedded.files import claim
from tackroom.engine.embedded.queues import QueueDispatcher
from tackroom.engine.embedded.store import NewMessage, Store
from tackroom.engine.embedded.subscriptions import StreamSubscription, SubscriptionHub
from tackroom.engine.embedded.unit import CURRENT_UNIT, Unit
from tackroom.engine.errors import (
    EngineClosed,
    RevisionConflict,
)
from tackroom.engine.functions import (
    FunctionRegistry,
    LocalRegistration,
    new_registration,
    trigger_here,
)
from tackroom.engine.jsonvalue import to_json_value
from tackroom.engine.local_channels import ChannelTable, LocalChannel, LocalChannelWriter
from tackroom.engine.ops import apply_ops
from tackroom.engine.protocol import (
    DEFAULT_TIMEOUT,
    ChannelRef,
    DeadLetter,
    EnqueueOptions,
    FunctionInfo,
    Handler,
    InvocationKind,
    QueueConfig,
    RegisterOptions,
    Running,
    StateEntry,
    StreamRecord,
    StreamRetention,
    UpdateOp,
    WorkerInfo,
)
from tackroom.engine.snapshots import SnapshotOffers
from tackroom.engine.tracing import EngineTracer, SpanMode
from tackroom.engine.values import enqueue_target

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["TRIGGER_QUEUE", "EmbeddedEngine"]

TRIGGER_QUEUE = "__triggers"
DEDUPE_WINDOW = 120.0
_HEADS_CACHED = 4096
_AGE_TRIM_EVERY_MAX = 60.0


class EmbeddedEngine(Running):
    """``Engine`` over asyncio and SQLite. ``path=None`` keeps everything in memory.

    ``read_only`` is for commands that only read: the file is opened read-only and shared with
    other readers, nothing is created or delivered, and a write raises ``EngineStorageError``.
    """

    def __init__(
        self,
        *,
        path: Path | None = None,
        tracer_provider: TracerProvider | None = None,
        trace_spans: SpanMode = "steps",
        read_only: bool = False,
    ) -> None:
        self._path = path
        self._read_only = read_only
        self._tracer = (
            None if tracer_provider is None else EngineTracer(tracer_provider, spans=trace_spans)
        )
        self._registry = FunctionRegistry(tracer=self._tracer)
        self._channels = ChannelTable()
        self._hub = SubscriptionHub()
        self._offers = SnapshotOffers()
        self._store: Store | None = None
        self._committer: GroupCommitter | None = None
        self._dispatcher: QueueDispatcher | None = None
        self._lock_fd: int | None = None
        self._open = False
        self._state_triggers: dict[str, list[LocalRegistration]] = {}
        self._stream_triggers: dict[str, list[LocalRegistration]] = {}
        self._cron_tasks: dict[str, asyncio.Task[None]] = {}
        self._retention: dict[str, StreamRetention] = {}
        # Last sequence per (stream, group), saving a read per append. Bounded: a server that
        # meets many sessions keeps only the recent ones (a miss reads stream_heads).
        self._heads: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._age_trimmed: OrderedDict[tuple[str, str], float] = OrderedDict()
        """When each recent group was last trimmed by age (see :meth:`_age_trim_due`)."""

    @property
    def path(self) -> Path | None:
        """The database file (``None``: everything in memory)."""
        return self._path

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._open:
            return
        if self._path is not None:
            self._lock_fd = claim(self._path, read_only=self._read_only)
        try:
            self._store = Store(self._path, read_only=self._read_only)
            self._committer = GroupCommitter(self._store)
            self._dispatcher = QueueDispatcher(
                self._store, self._registry, committer=self._committer
            )
            if not self._read_only:
                self._dispatcher.start()
        except BaseException:
            if self._store is not None:
                self._store.close()
            self._store = self._dispatcher = self._committer = None
            self._unlock()
            raise
        self._registry.on_change = self._dispatcher.wake
        self._open = True

    async def close(self) -> None:
        """Stop deliveries and cron first (handlers still see a working engine while they are
        cancelled), then refuse calls and release the file."""
        if not self._open:
            return
        crons = list(self._cron_tasks.values())
        for task in crons:
            task.cancel()
        await asyncio.gather(*crons, return_exceptions=True)
        self._cron_tasks.clear()
        if self._dispatcher is not None:
            await self._dispatcher.close()
        self._open = False
        await self._hub.close_all()
        await self._channels.close_all()
        if self._committer is not None:
            self._committer.flush()  # writers that handed their writes over before the close
        if self._store is not None:
            self._store.close()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _live_store(self) -> Store:
        if not self._open or self._store is None:
            raise EngineClosed("the engine is not running")
        return self._store

    def _wake(self) -> None:
        if self._dispatcher is not None:
            self._dispatcher.wake()

    async def _commit(
        self,
        write: Callable[[], Any],
        *,
        check: Callable[[], None] | None = None,
        notices: list[Notice] | None = None,
    ) -> Any:
        """One writer's writes, committed alone or with the others ready now (:mod:`.commits`)."""
        if self._committer is None:
            raise EngineClosed("the engine is not running")
        return await self._committer.commit(Pending(write, check, notices or []))

    # -- functions ------------------------------------------------------------------------------
    async def register_function(
        self, function_id: str, handler: Handler, **options: Unpack[RegisterOptions]
    ) -> LocalRegistration:
        registration = new_registration(
            function_id, handler, on_unregister=self._unregister_function, **options
        )
        self._registry.add(registration)
        return registration

    async def _unregister_function(self, registration: LocalRegistration) -> None:
        self._registry.remove(registration)

    async def trigger(
        self, function_id: str, payload: Any = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        if not self._open:
            raise EngineClosed("the engine is not running")
        return await trigger_here(self._registry, function_id, payload, timeout=timeout)

    async def list_functions(self) -> list[FunctionInfo]:
        return self._registry.functions()

    async def list_workers(self) -> list[WorkerInfo]:
        return self._registry.workers()

    # -- queues -------------------------------------------------------------------------------
    async def configure_queue(self, queue: str, config: QueueConfig) -> None:
        if self._dispatcher is None:
            raise EngineClosed("the engine is not running")
        self._dispatcher.configure(queue, config)

    async def enqueue(
        self,
        function_id: str,
        payload: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> str:
        payload = to_json_value(payload)
        queue, group, dedupe_key = enqueue_target(options)
        return await self._enqueue(
            NewMessage(
                queue, function_id, "queue", payload, group, self._capture(payload), dedupe_key
            )
        )

    async def _enqueue(self, message: NewMessage) -> str:
        store = self._live_store()
        unit = self._unit()
        if unit is not None:
            message_id = uuid.uuid4().hex
            unit.keep(
                lambda: self._insert_message(store, message, message_id=message_id), self._wake
            )
            return message_id
        message_id = await self._commit(
            lambda: self._insert_message(store, message), notices=[self._wake]
        )
        return str(message_id)

    def _insert_message(
        self, store: Store, message: NewMessage, *, message_id: str | None = None
    ) -> str:
        return store.insert_message(
            message, now=_now(), dedupe_window=DEDUPE_WINDOW, message_id=message_id
        )

    def _capture(self, payload: Any) -> dict[str, str] | None:
        return None if self._tracer is None else self._tracer.capture(payload)

    async def list_dead_letters(self, queue: str) -> list[DeadLetter]:
        return self._live_store().dead_letters(queue)

    async def redrive(self, queue: str, *, message_ids: list[str] | None = None) -> int:
        store = self._live_store()
        with store.transaction():
            count = store.redrive(queue, message_ids, now=_now())
        self._wake()
        return count

    # -- state --------------------------------------------------------------------------------
    async def get_state(self, scope: str, key: str) -> StateEntry | None:
        store = self._live_store()
        unit = self._unit()
        if unit is not None:
            return unit.get((scope, key), lambda: store.get_state(scope, key))
        return store.get_state(scope, key)

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry:
        value = to_json_value(value, what="state value")
        store = self._live_store()
        unit = self._unit()
        if unit is not None:
            if expected_revision is not None:  # a plain write needs no revision read
                current = unit.revision((scope, key), lambda: store.current_revision(scope, key))
                unit.check((scope, key), current, expected_revision)
            entry = StateEntry(scope, key, value, store.reserve_revision())
            unit.keep_state(
                (scope, key),
                entry,
                lambda: self._put(store, entry, "set"),
                self._wake if scope in self._state_triggers else None,
            )
            return entry
        written = await self._commit(
            lambda: self._put(store, StateEntry(scope, key, value, 0), "set"),
            check=self._compare(store, scope, key, expected_revision),
            notices=self._state_notices(scope),
        )
        assert isinstance(written, StateEntry)
        return written

    async def update_state(self, scope: str, key: str, ops: list[UpdateOp]) -> StateEntry:
        store = self._live_store()
        unit = self._unit()
        if unit is not None:
            current = unit.get((scope, key), lambda: store.get_state(scope, key))
            value = apply_ops(None if current is None else current.value, ops)
            entry = StateEntry(scope, key, value, store.reserve_revision())
            unit.read_modify_write((scope, key))
            unit.keep_state(
                (scope, key),
                entry,
                lambda: self._put(store, entry, "update"),
                self._wake if scope in self._state_triggers else None,
            )
            return entry
        seen: list[tuple[StateEntry | None, Any]] = []

        def check() -> None:  # the value as it stands in the batch: no update is lost
            old = store.get_state(scope, key)
            seen.append((old, apply_ops(None if old is None else old.value, ops)))

        def write() -> StateEntry:
            old, value = seen[-1]
            return self._put(store, StateEntry(scope, key, value, 0), "update", old=old)

        written = await self._commit(write, check=check, notices=self._state_notices(scope))
        assert isinstance(written, StateEntry)
        return written

    def _compare(
        self, store: Store, scope: str, key: str, expected_revision: int | None
    ) -> Callable[[], None] | None:
        """The compare-and-set check of a write outside a unit, made in its batch."""
        if expected_revision is None:
            return None

        def check() -> None:
            actual = store.current_revision(scope, key)
            if actual != expected_revision:
                raise RevisionConflict(scope, key, expected_revision, actual)

        return check

    def _state_notices(self, scope: str) -> list[Notice]:
        return [self._wake] if scope in self._state_triggers else []

    def _put(
        self,
        store: Store,
        entry: StateEntry,
        event: str,
        *,
        old: StateEntry | bool | None = False,
    ) -> StateEntry:
        """Write ``entry`` inside an open transaction (its revision, if not 0) and fire the
        scope's state triggers; ``old``: the value before, if the caller read it already."""
        triggers = self._state_triggers.get(entry.scope)
        if triggers and old is False:
            old = store.get_state(entry.scope, entry.key)
        revision = store.put_state(
            entry.scope, entry.key, entry.value, revision=entry.revision or None
        )
        if triggers:
            before = old if isinstance(old, StateEntry) else None
            self._fire_state(triggers, entry.scope, entry.key, event, before, entry.value, revision)
        return StateEntry(entry.scope, entry.key, entry.value, revision)

    async def delete_state(
        self, scope: str, key: str, *, expected_revision: int | None = None
    ) -> bool:
        store = self._live_store()
        unit = self._unit()
        if unit is not None:
            current = unit.revision((scope, key), lambda: store.current_revision(scope, key))
            unit.check((scope, key), current, expected_revision)
            unit.keep_state(
                (scope, key),
                None,
                lambda: self._remove(store, scope, key),
                self._wake if scope in self._state_triggers else None,
            )
            return current != 0
        deleted = await self._commit(
            lambda: self._remove(store, scope, key),
            check=self._compare(store, scope, key, expected_revision),
            notices=self._state_notices(scope),
        )
        return bool(deleted)

    def _remove(self, store: Store, scope: str, key: str) -> bool:
        triggers = self._state_triggers.get(scope)
        old = store.get_state(scope, key) if triggers else None
        deleted = store.remove_state(scope, key)
        if deleted and triggers:
            self._fire_state(triggers, scope, key, "delete", old, None, 0)
        return deleted

    async def list_state(self, scope: str, *, prefix: str = "") -> list[StateEntry]:
        stored = self._live_store().list_state(scope, prefix)
        unit = self._unit()
        return stored if unit is None else unit.overlay(scope, prefix, stored)

    # -- units of work -------------------------------------------------------------------------
    atomic_transactions = True
    takes_models = True
    """A pydantic request goes by reference to an in-process handler that takes models (a
    typed handler); to any other, as its JSON copy."""

    def _unit(self) -> Unit | None:
        unit = CURRENT_UNIT.get()
        return unit if unit is not None and unit.open and unit.owner is self else None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """Writes inside commit in one SQLite transaction at the end (see :mod:`.unit`)."""
        if self._unit() is not None:
            yield  # nested: the outer unit commits
            return
        store = self._live_store()
        unit = Unit(self)
        token = CURRENT_UNIT.set(unit)
        try:
            yield
        except BaseException:
            unit.discard()
            raise
        finally:
            CURRENT_UNIT.reset(token)
        pending = unit.pending(store.current_revision)
        if pending is not None:
            if self._committer is None:
                raise EngineClosed("the engine is not running")
            await self._committer.commit(pending)

    def _fire_state(
        self,
        triggers: list[LocalRegistration],
        scope: str,
        key: str,
        event: str,
        old: StateEntry | None,
        new_value: Any,
        revision: int,
    ) -> None:
        payload = {
            "scope": scope,
            "key": key,
            "event": event,
            "old_value": None if old is None else old.value,
            "new_value": new_value,
            "revision": revision,
        }
        self._fire(triggers, payload, "state_trigger", f"state:{scope}:{key}")

    def _fire(
        self,
        triggers: list[LocalRegistration],
        payload: dict[str, Any],
        kind: InvocationKind,
        group: str,
    ) -> None:
        """Insert one trigger delivery per registration, inside the caller's transaction."""
        store = self._live_store()
        headers = self._capture(None)
        for trigger in triggers:
            store.insert_message(
                NewMessage(TRIGGER_QUEUE, trigger.function_id, kind, payload, group, headers),
                now=_now(),
                dedupe_window=DEDUPE_WINDOW,
            )

    # -- triggers -------------------------------------------------------------------------------
    async def add_state_trigger(
        self, scope: str, function_id: str, *, worker: str = "anonymous"
    ) -> LocalRegistration:
        return self._add_trigger(self._state_triggers, scope, function_id, worker)

    async def add_stream_trigger(
        self, stream: str, function_id: str, *, worker: str = "anonymous"
    ) -> LocalRegistration:
        return self._add_trigger(self._stream_triggers, stream, function_id, worker)

    def _add_trigger(
        self,
        table: dict[str, list[LocalRegistration]],
        source: str,
        function_id: str,
        worker: str,
    ) -> LocalRegistration:
        self._live_store()

        async def remove(registration: LocalRegistration) -> None:
            entries = table.get(source, [])
            if registration in entries:
                entries.remove(registration)
            if not entries:
                table.pop(source, None)

        registration = LocalRegistration(
            function_id=function_id, handler=None, worker=worker, on_unregister=remove
        )
        table.setdefault(source, []).append(registration)
        return registration

    async def add_cron_trigger(
        self, schedule: str, function_id: str, *, worker: str = "anonymous"
    ) -> LocalRegistration:
        if not self._open:
            raise EngineClosed("the engine is not running")
        cron = CronSchedule(schedule)
        return cron_registration(
            self._cron_tasks,
            function_id,
            worker,
            lambda: asyncio.create_task(
                self._run_cron(cron, function_id), name=f"tackroom-cron-{function_id}"
            ),
        )

    async def _run_cron(self, cron: CronSchedule, function_id: str) -> None:
        async for fired_at in cron.fires():
            await self._enqueue(
                NewMessage(
                    TRIGGER_QUEUE,
                    function_id,
                    "cron",
                    cron.payload(fired_at),
                    None,
                    self._capture(None),
                    dedupe_key=cron.dedupe_key(function_id, fired_at),
                )
            )

    # -- streams ------------------------------------------------------------------------------
    async def configure_stream(self, stream: str, retention: StreamRetention) -> None:
        if retention.max_len is not None and retention.max_len < 1:
            raise ValueError("max_len must be at least 1")
        store = self._live_store()
        self._retention[stream] = retention
        with store.transaction():
            store.apply_retention(
                stream,
                max_len=retention.max_len,
                before_ts=None if retention.max_age is None else _now() - retention.max_age,
            )

    async def append(self, stream: str, group_id: str, data: Any) -> int:
        data = to_json_value(data, what="stream record")
        store = self._live_store()
        unit = self._unit()
        written: list[StreamRecord] = []

        def write() -> StreamRecord:
            # After the group's records written earlier in this transaction, by any writer.
            assert self._committer is not None
            heads = self._committer.heads
            after = heads.get((stream, group_id))
            if after is None:
                after = self._head(store, stream, group_id)
            record = self._insert_record(store, stream, group_id, data, after=after)
            heads[(stream, group_id)] = record.seq
            written.append(record)
            return record

        def notice() -> None:
            self._appended(written[0])

        if unit is not None:
            head = self._head(store, stream, group_id)
            expected = head + unit.pending_appends(stream, group_id) + 1
            unit.keep_append(stream, group_id, write, notice)
            return expected
        record = await self._commit(write, notices=[notice])
        assert isinstance(record, StreamRecord)
        return record.seq

    def _head(self, store: Store, stream: str, group_id: str) -> int:
        head = self._heads.get((stream, group_id))
        return store.stream_head(stream, group_id) if head is None else head

    def _insert_record(
        self, store: Store, stream: str, group_id: str, data: Any, *, after: int
    ) -> StreamRecord:
        """Store the group's record after sequence ``after``, inside an open transaction."""
        now = _now()
        record = StreamRecord(stream, group_id, after + 1, data, now)
        retention = self._retention.get(stream)
        store.insert_record(record)
        if retention is not None:
            max_age = retention.max_age
            store.trim_stream(
                stream,
                group_id,
                below_seq=None if retention.max_len is None else record.seq - retention.max_len + 1,
                before_ts=(
                    now - max_age
                    if max_age is not None and self._age_trim_due((stream, group_id), now, max_age)
                    else None
                ),
            )
        triggers = self._stream_triggers.get(stream)
        if triggers:
            payload = {"stream": stream, "group_id": group_id, "seq": record.seq, "data": data}
            self._fire(triggers, payload, "stream_trigger", f"stream:{stream}:{group_id}")
        return record

    def _age_trim_due(self, key: tuple[str, str], now: float, max_age: float) -> bool:
        """Whether to delete the group's records older than ``max_age`` with this append: at most
        every ``max_age / 100`` seconds (a minute at most). That delete scans the group, which a
        long-kept stream (``audit::facts``) makes long; reads skip expired records anyway, so it
        only frees room, and doing it at every append would cost more as the group grows."""
        last = self._age_trimmed.get(key)
        if last is not None and now - last < min(max_age / 100, _AGE_TRIM_EVERY_MAX):
            return False
        self._age_trimmed[key] = now
        self._age_trimmed.move_to_end(key)
        if len(self._age_trimmed) > _HEADS_CACHED:
            self._age_trimmed.popitem(last=False)
        return True

    def _appended(self, record: StreamRecord) -> None:
        """After the record's transaction committed: keep its head, tell subscribers."""
        head_key = (record.stream, record.group_id)
        self._heads[head_key] = record.seq
        self._heads.move_to_end(head_key)
        if len(self._heads) > _HEADS_CACHED:
            self._heads.popitem(last=False)
        self._hub.publish(record)
        if record.stream in self._stream_triggers:
            self._wake()

    def _read_page(self, stream: str, group_id: str, after: int, limit: int) -> list[StreamRecord]:
        retention = self._retention.get(stream)
        max_age = None if retention is None else retention.max_age
        return self._live_store().read_stream(
            stream,
            group_id,
            after=after,
            limit=limit,
            min_ts=None if max_age is None else _now() - max_age,
        )

    async def read(
        self, stream: str, group_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[StreamRecord]:
        return self._read_page(stream, group_id, after, limit)

    async def subscribe(self, stream: str, group_id: str, *, after: int = 0) -> StreamSubscription:
        self._live_store()
        key = (stream, group_id)
        subscription = StreamSubscription(
            self._hub,
            key,
            after=after,
            read_page=lambda cursor, limit: self._read_page(stream, group_id, cursor, limit),
        )
        self._hub.add(key, subscription)
        return subscription

    async def delete_group(self, stream: str, group_id: str) -> int:
        store = self._live_store()
        with store.transaction():
            return store.delete_group(stream, group_id)

    # -- live frames ----------------------------------------------------------------------------
    async def publish(self, stream: str, group_id: str, data: Any) -> None:
        """Pushed with the appends of this process, in call order (see :mod:`.subscriptions`)."""
        self._live_store()
        data = to_json_value(data, what="live record")
        if self._hub.subscribed((stream, group_id)):
            self._hub.publish(StreamRecord(stream, group_id, 0, data, _now(), True))

    @asynccontextmanager
    async def offer_snapshot(
        self, stream: str, group_id: str, provider: Callable[[], Any]
    ) -> AsyncIterator[None]:
        self._live_store()
        with self._offers.offer((stream, group_id), provider):
            yield

    async def snapshot(self, stream: str, group_id: str) -> list[StreamRecord]:
        head = self._head(self._live_store(), stream, group_id)
        now = _now()
        return [
            StreamRecord(stream, group_id, head, value, now, True)
            for value in self._offers.values((stream, group_id))
        ]

    # -- channels -------------------------------------------------------------------------------
    async def open_channel(self, *, capacity: int = 64) -> LocalChannel:
        self._live_store()
        return self._channels.open(capacity=capacity)

    def channel_writer(self, ref: ChannelRef) -> LocalChannelWriter:
        return self._channels.writer(ref)


def _now() -> float:
    return time.time()
