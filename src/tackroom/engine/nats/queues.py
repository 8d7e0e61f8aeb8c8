"""Queues on a JetStream work-queue stream: enqueue, the pair registry, dead letters, redrive.

A message is published to ``<ns>.q.<queue>.<function>.<lane>`` — ``lane`` is the group's
partition (``partition_of(group) % partitions``) or ``n`` without a group — as
``{"schema_version": 1, "queue", "function_id", "kind", "payload", "group"}`` with the producer's
trace headers. Its id is ``q-<stream sequence>`` (a redriven or relayed message carries its id in
``Tackroom-Message-Id``). ``dedupe_key`` becomes ``Nats-Msg-Id``: JetStream drops a repeat within
its two-minute window and answers with the first message's sequence, hence the first id.

Processes learn which ``(queue, function)`` pairs exist from the ``pair.*`` keys of the
namespace's meta bucket (written once per pair) and a core-NATS announcement, and pull the pairs
of the functions they serve. Dead letters are stored on ``<ns>.dead.<queue>`` in a limits stream.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from nats.aio.msg import Msg

from tackroom.engine.jsonvalue import dumps, to_json_value
from tackroom.engine.nats.delivery import MESSAGE_ID_HEADER, Dispatcher, Held
from tackroom.engine.nats.link import Link, WrongLastSequence
from tackroom.engine.nats.naming import (
    Names,
    decode_token,
    partition_of,
    short_hash,
)
from tackroom.engine.nats.state import is_delete, message_seq, message_subject
from tackroom.engine.protocol import DeadLetter, InvocationKind, QueueConfig

__all__ = ["QUEUE_SCHEMA_VERSION", "QueueBroker"]

log = logging.getLogger(__name__)

QUEUE_SCHEMA_VERSION = 1

Capture = Callable[[Any], dict[str, str] | None]


class QueueBroker:
    def __init__(
        self, link: Link, names: Names, dispatcher: Dispatcher, *, partitions: int, capture: Capture
    ) -> None:
        self._link = link
        self._names = names
        self._dispatcher = dispatcher
        self._partitions = partitions
        self._capture = capture
        self._configs: dict[str, QueueConfig] = {}
        self._announce = f"{names.ns}.pairs"
        self._meta_stream = f"KV_{names.meta_bucket}"

    # -- configuration ---------------------------------------------------------------------
    def config(self, queue: str) -> QueueConfig:
        return self._configs.get(queue) or QueueConfig()

    async def configure(self, queue: str, config: QueueConfig) -> None:
        if config.max_deliveries < 1 or config.concurrency < 1:
            raise ValueError("max_deliveries and concurrency must be at least 1")
        if config.visibility_timeout <= 0:
            raise ValueError("visibility_timeout must be positive")
        self._configs[queue] = config
        await self._dispatcher.configure(queue, config)

    # -- pairs -----------------------------------------------------------------------------
    async def start(self) -> None:
        await self._link.nc.subscribe(self._announce, cb=self._on_announce)
        await self.load_pairs()
        self._link.on_reconnect(self.load_pairs)

    async def load_pairs(self) -> None:
        prefix = f"$KV.{self._names.meta_bucket}.pair."
        for msg in await self._link.last_per_subject(self._meta_stream, prefix + ">"):
            if not is_delete(msg):
                queue, function_id = message_subject(msg)[len(prefix) :].split(".", 1)
                self._dispatcher.add_pair(decode_token(queue), decode_token(function_id))

    async def _on_announce(self, msg: Msg) -> None:
        try:
            pair = json.loads(msg.data)
            self._dispatcher.add_pair(str(pair["queue"]), str(pair["function_id"]))
        except (ValueError, KeyError, TypeError):
            log.debug("ignored a malformed pair announcement")

    async def _ensure_pair(self, queue: str, function_id: str) -> None:
        if (queue, function_id) in self._dispatcher.pairs:
            return
        body = dumps({"schema_version": 1, "queue": queue, "function_id": function_id}).encode()
        subject = f"$KV.{self._names.meta_bucket}.{self._names.pair_key(queue, function_id)}"
        with contextlib.suppress(WrongLastSequence):  # another process registered it first
            await self._link.js_publish(
                subject, body, headers={"Nats-Expected-Last-Subject-Sequence": "0"}
            )
        await self._link.publish(self._announce, body)
        self._dispatcher.add_pair(queue, function_id)

    # -- enqueue ---------------------------------------------------------------------------
    async def enqueue(
        self,
        function_id: str,
        payload: Any,
        *,
        queue: str,
        group: str | None,
        dedupe_key: str | None = None,
        kind: InvocationKind = "queue",
        message_id: str | None = None,
        headers: dict[str, str] | None = None,
        copy: bool = True,
    ) -> str:
        if copy:
            payload = to_json_value(payload)
        await self._ensure_pair(queue, function_id)
        lane = "n" if group is None else str(partition_of(group, self._partitions))
        body = {
            "schema_version": QUEUE_SCHEMA_VERSION,
            "queue": queue,
            "function_id": function_id,
            "kind": kind,
            "payload": payload,
            "group": group,
        }
        out: dict[str, str] = {}
        trace = headers if headers is not None else self._capture(payload)
        if trace:
            out.update(trace)
        if message_id is not None:
            out[MESSAGE_ID_HEADER] = message_id
        if dedupe_key is not None:
            out["Nats-Msg-Id"] = f"d-{short_hash(queue, dedupe_key)}"
        ack = await self._link.js_publish(
            self._names.queue_subject(queue, function_id, lane),
            dumps(body).encode(),
            headers=out or None,
        )
        return message_id or f"q-{ack.seq}"

    # -- dead letters ----------------------------------------------------------------------
    async def bury(self, held: Held, attempts: int, error: str) -> None:
        envelope = held.envelope
        record = {
            "schema_version": QUEUE_SCHEMA_VERSION,
            "message_id": held.message_id,
            "queue": held.queue,
            "function_id": envelope.get("function_id", ""),
            "kind": envelope.get("kind", "queue"),
            "payload": envelope.get("payload"),
            "group": envelope.get("group"),
            "attempts": attempts,
            "last_error": error,
            "headers": held.trace_headers,
        }
        await self._link.js_publish(
            self._names.dead_subject(held.queue),
            dumps(record).encode(),
            headers={"Nats-Msg-Id": f"dead-{held.msg.metadata.sequence.stream}"},
        )
        await held.msg.ack()
        log.warning(
            "dead-lettered %s on queue %s after %d deliveries",
            record["function_id"],
            held.queue,
            attempts,
        )

    async def _dead(self, queue: str) -> list[tuple[int, dict[str, Any]]]:
        found: list[tuple[int, dict[str, Any]]] = []
        seq = 1
        while True:
            page = await self._link.direct_get(
                self._names.dead_stream,
                {"seq": seq, "next_by_subj": self._names.dead_subject(queue), "batch": 1000},
            )
            found.extend((message_seq(m), json.loads(m.data)) for m in page)
            if len(page) < 1000:
                return found
            seq = found[-1][0] + 1

    async def dead_letters(self, queue: str) -> list[DeadLetter]:
        return [
            DeadLetter(
                message_id=r["message_id"],
                queue=queue,
                function_id=r["function_id"],
                payload=r["payload"],
                group=r["group"],
                attempts=int(r["attempts"]),
                last_error=r["last_error"],
            )
            for _, r in await self._dead(queue)
        ]

    async def redrive(self, queue: str, message_ids: list[str] | None) -> int:
        wanted = None if message_ids is None else set(message_ids)
        count = 0
        for seq, record in await self._dead(queue):
            if wanted is not None and record["message_id"] not in wanted:
                continue
            await self.enqueue(
                record["function_id"],
                record["payload"],
                queue=queue,
                group=record["group"],
                kind=record["kind"],
                message_id=record["message_id"],
                headers=record.get("headers") or {},
                dedupe_key=f"redrive:{seq}",
                copy=False,
            )
            try:
                await self._link.js.delete_msg(self._names.dead_stream, seq)
            except Exception as exc:  # already gone: another process redrove it
                log.debug("dead letter %d not deleted: %s", seq, exc)
            count += 1
        return count
