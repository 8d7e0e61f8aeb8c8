"""State, stream and cron triggers.

A state or stream trigger is a **relay**: one durable consumer per ``(kind, source, function)``
on the source stream (the state KV bucket filtered to the scope, or the event stream), created
with ``DeliverPolicy.NEW`` when the trigger is added — so a write made after ``add_*_trigger``
returned is never missed, and nothing written before is replayed. Every process holding the
trigger pulls from the same consumer (``max_ack_pending=1``), so each write is relayed once and in
write order, whichever replicas run. The relay turns a write into a message on the internal queue
``__triggers`` (``Nats-Msg-Id`` per source sequence, so a relay that crashed mid-way and is
redone enqueues nothing twice), grouped per key / per stream group; from there delivery, retries,
dead letters and ``redrive`` are those of any queue.

The old value of a state write is the key's previous revision, read back from the bucket's history
with a batch direct get (``multi_last`` up to the write's sequence minus one).

A cron trigger runs a timer in every process that registered it; each fire is enqueued with
``Nats-Msg-Id = cron:<function>:<schedule>:<fire time>``, so it runs once however many processes
hold the schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg

from tackroom.engine.cron import CronSchedule, cron_registration
from tackroom.engine.errors import EngineError
from tackroom.engine.functions import LocalRegistration
from tackroom.engine.nats.catalog import Catalog, TriggerHold
from tackroom.engine.nats.delivery import cancel_if_cancelling
from tackroom.engine.nats.link import JetStreamError, Link, unavailable
from tackroom.engine.nats.naming import Names, decode_token
from tackroom.engine.nats.queues import QueueBroker
from tackroom.engine.nats.state import EVENT_HEADER, is_delete
from tackroom.engine.nats.streams import EventStreams

__all__ = ["TRIGGER_QUEUE", "Triggers"]

log = logging.getLogger(__name__)

TRIGGER_QUEUE = "__triggers"
_RELAY_ACK_WAIT = 10.0
_PIN_TIMEOUT = 10.0
_PULL_EXPIRES = 5.0
_RELAY_WINDOW = 10_000
_PRIORITY_GROUP = "relay"
_TRACE_HEADERS = ("traceparent", "tracestate", "baggage")


class Triggers:
    def __init__(
        self,
        link: Link,
        names: Names,
        broker: QueueBroker,
        streams: EventStreams,
        catalog: Catalog,
    ) -> None:
        self._link = link
        self._names = names
        self._broker = broker
        self._streams = streams
        self._catalog = catalog
        self._state_stream = f"KV_{names.state_bucket}"
        self._holds: dict[TriggerHold, list[LocalRegistration]] = {}
        self._relays: dict[TriggerHold, asyncio.Task[None]] = {}
        self._crons: dict[str, asyncio.Task[None]] = {}

    def held(self) -> list[TriggerHold]:
        return sorted(self._holds)

    # -- relays ----------------------------------------------------------------------------
    async def _source(self, hold: TriggerHold) -> tuple[str, str]:
        kind, source, _ = hold
        if kind == "state":
            return self._state_stream, self._names.state_scope_filter(source)
        return await self._streams.ensure(source), self._names.event_subjects(source)

    async def _ensure_consumer(self, hold: TriggerHold) -> tuple[str, str]:
        """Create the relay consumer (pinned-client priority group) unless it exists."""
        stream, subject = await self._source(hold)
        durable = self._names.relay_consumer(*hold)
        config = {
            "durable_name": durable,
            "name": durable,
            "filter_subject": subject,
            "deliver_policy": "new",
            "ack_policy": "explicit",
            "ack_wait": _seconds(_RELAY_ACK_WAIT),
            "max_ack_pending": _RELAY_WINDOW,
            "max_deliver": -1,
            "num_replicas": self._link.options.replicas,
            "priority_policy": "pinned_client",
            "priority_groups": [_PRIORITY_GROUP],
            "priority_timeout": _seconds(_PIN_TIMEOUT),
        }
        request = {"stream_name": stream, "config": config}
        answer = await self._link.request(
            f"$JS.API.CONSUMER.CREATE.{stream}.{durable}",
            json.dumps(request).encode(),
            timeout=5.0,
        )
        error = json.loads(answer.data).get("error")
        if error is not None:
            raise JetStreamError(int(error.get("err_code", 0)), str(error.get("description")))
        return stream, durable

    async def add(self, kind: str, source: str, function_id: str, worker: str) -> LocalRegistration:
        hold: TriggerHold = (kind, source, function_id)
        registration = LocalRegistration(
            function_id=function_id, handler=None, worker=worker, on_unregister=self._remove
        )
        if hold not in self._holds:
            stream, durable = await self._ensure_consumer(hold)
            self._relays[hold] = self._link.spawn(
                self._relay(hold, stream, durable), name=f"tackroom-relay-{kind}"
            )
            self._holds[hold] = []
            await self._catalog.publish()
        self._holds[hold].append(registration)
        return registration

    async def _remove(self, registration: LocalRegistration) -> None:
        for hold, registrations in list(self._holds.items()):
            if registration not in registrations:
                continue
            registrations.remove(registration)
            if registrations:
                return
            del self._holds[hold]
            relay = self._relays.pop(hold)
            relay.cancel()
            await asyncio.gather(relay, return_exceptions=True)
            await self._catalog.publish()
            if await self._catalog.holders(hold) == 0:
                stream, _ = await self._source(hold)
                try:
                    await self._link.js.delete_consumer(stream, self._names.relay_consumer(*hold))
                except nats.js.errors.NotFoundError:
                    pass
                except nats.errors.Error as exc:  # JetStream away or not answering yet
                    raise unavailable(exc) from None
            return

    async def _relay(self, hold: TriggerHold, stream: str, durable: str) -> None:
        """Keep a pull request open on the relay consumer and relay what arrives, in order.

        The consumer pins one client of the priority group: only the pinned process receives
        writes; the others' requests wait until it stops pulling for ``_PIN_TIMEOUT`` seconds.
        """
        nc = self._link.nc
        inbox = nc.new_inbox()
        arrived: asyncio.Queue[Msg] = asyncio.Queue()
        statuses: asyncio.Queue[str] = asyncio.Queue()
        pin: str | None = None

        async def on_message(msg: Msg) -> None:
            nonlocal pin
            headers = msg.headers or {}
            status = headers.get("Status")
            if status is None:
                pin = headers.get("Nats-Pin-Id") or pin
                arrived.put_nowait(msg)
            else:
                statuses.put_nowait(f"{status} {headers.get('Description', '')}")

        async def wake_after_reconnect() -> None:
            statuses.put_nowait("reconnected")

        forget = self._link.on_reconnect(wake_after_reconnect)
        sub = await nc.subscribe(inbox, cb=on_message)
        drain = self._link.spawn(self._drain(hold, durable, arrived), name="tackroom-relay-drain")
        next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        try:
            while True:
                cancel_if_cancelling()
                request: dict[str, Any] = {
                    "batch": _RELAY_WINDOW,
                    "expires": _seconds(_PULL_EXPIRES),
                    "group": _PRIORITY_GROUP,
                }
                if pin is not None:
                    request["id"] = pin
                try:
                    await nc.publish(next_subject, json.dumps(request).encode(), reply=inbox)
                    status = await asyncio.wait_for(statuses.get(), _PULL_EXPIRES + 5)
                except (TimeoutError, nats.errors.Error):
                    cancel_if_cancelling()
                    await asyncio.sleep(0.25)
                    continue
                if status.startswith("423"):  # another process holds the pin now
                    pin = None
                elif status.startswith("409") and "Deleted" in status:
                    await self._ensure_consumer(hold)  # deleted under us by a last unregister
                elif not status.startswith(("408", "404", "reconnected")):
                    log.debug("relay pull ended with %s", status)
                    await asyncio.sleep(0.25)
        finally:
            forget()
            drain.cancel()
            await asyncio.gather(drain, return_exceptions=True)
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            if pin is not None:
                with contextlib.suppress(Exception):
                    await self._link.request(
                        f"$JS.API.CONSUMER.UNPIN.{stream}.{durable}",
                        json.dumps({"group": _PRIORITY_GROUP}).encode(),
                        timeout=2.0,
                    )

    async def _drain(self, hold: TriggerHold, durable: str, arrived: asyncio.Queue[Msg]) -> None:
        """Relay each arrived write in order; a write is acknowledged once its event is queued."""
        while True:
            msg = await arrived.get()
            while True:
                try:
                    await self._forward(hold, durable, msg)
                except EngineError as exc:  # NATS is down: retry this write, keep the order
                    log.warning("trigger relay will retry: %s", exc)
                    await asyncio.sleep(0.5)
                    continue
                except (ValueError, KeyError, TypeError) as exc:
                    log.error("trigger relay skips a malformed write: %s", exc)
                break
            await _quietly(msg.ack())

    async def _forward(self, hold: TriggerHold, durable: str, msg: Msg) -> None:
        kind, source, function_id = hold
        seq = msg.metadata.sequence.stream
        headers = {k: v for k, v in (msg.headers or {}).items() if k in _TRACE_HEADERS}
        payload: dict[str, Any]
        if kind == "state":
            scope, key = self._names.state_from_subject(msg.subject)
            deleted = is_delete(msg)
            stored = json.loads(msg.data) if msg.data else {}
            payload = {
                "scope": scope,
                "key": key,
                "event": "delete" if deleted else (msg.headers or {}).get(EVENT_HEADER, "set"),
                "old_value": stored.get("old_value"),
                "new_value": None if deleted else stored.get("value"),
                "revision": 0 if deleted else seq,
            }
            group, invocation_kind = f"state:{scope}:{key}", "state_trigger"
        else:
            group_id = decode_token(msg.subject.rsplit(".", 1)[1])
            record = json.loads(msg.data)
            payload = {
                "stream": source,
                "group_id": group_id,
                "seq": record["seq"],
                "data": record["data"],
            }
            group, invocation_kind = f"stream:{source}:{group_id}", "stream_trigger"
        await self._broker.enqueue(
            function_id,
            payload,
            queue=TRIGGER_QUEUE,
            group=group,
            kind=invocation_kind,  # type: ignore[arg-type]
            message_id=f"{durable}-{seq}",
            dedupe_key=f"{durable}:{seq}",
            headers=headers,
            copy=False,
        )

    # -- cron ------------------------------------------------------------------------------
    def add_cron(self, schedule: str, function_id: str, worker: str) -> LocalRegistration:
        cron = CronSchedule(schedule)
        return cron_registration(
            self._crons,
            function_id,
            worker,
            lambda: self._link.spawn(
                self._run_cron(cron, function_id), name=f"tackroom-cron-{function_id}"
            ),
        )

    async def _run_cron(self, cron: CronSchedule, function_id: str) -> None:
        async for fired_at in cron.fires():
            try:
                await self._broker.enqueue(
                    function_id,
                    cron.payload(fired_at),
                    queue=TRIGGER_QUEUE,
                    group=None,
                    kind="cron",
                    dedupe_key=cron.dedupe_key(function_id, fired_at),
                    copy=False,
                )
            except EngineError as exc:
                log.warning("cron fire of %s at %s lost: %s", function_id, fired_at, exc)

    async def close(self) -> None:
        tasks = [*self._relays.values(), *self._crons.values()]
        self._relays.clear()
        self._crons.clear()
        self._holds.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _seconds(value: float) -> int:
    return int(value * 1_000_000_000)


async def _quietly(coro: Any) -> None:
    try:
        await coro
    except Exception:  # the server redelivers if an ack or nak is lost
        log.debug("relay ack failed", exc_info=True)
