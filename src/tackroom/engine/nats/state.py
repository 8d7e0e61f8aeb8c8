"""State on a JetStream KV bucket: revisions are stream sequences, compare-and-set is
``Nats-Expected-Last-Subject-Sequence``.

A revision is stored under ``$KV.<ns>_state.<scope>.<key>`` (both parts encoded) as
``{"schema_version": 1, "value": <new>, "old_value": <the value it replaced>}``; a delete is a KV
delete marker with the same body (``value`` null). Every write carries ``Tackroom-Event``
(``set``/``update``/``delete``) and the writer's trace headers. So a write is a complete state
trigger event by itself: the trigger relays (``triggers.py``) need nothing else, and the old value
is exact however far behind a relay runs.

To know the value it replaces, every write is a compare-and-set on the key's last sequence (a
plain ``set_state`` retries on a lost race). A small cache of the last revision this process saw
per key saves the read before it: the server checks the sequence, so a stale cache only costs a
retry.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg

from tackroom.engine.errors import RevisionConflict
from tackroom.engine.jsonvalue import dumps, to_json_value
from tackroom.engine.nats.link import Link, WrongLastSequence
from tackroom.engine.nats.naming import Names
from tackroom.engine.ops import apply_ops
from tackroom.engine.protocol import StateEntry, UpdateOp

__all__ = [
    "EVENT_HEADER",
    "SCHEMA_HEADER",
    "STATE_SCHEMA_VERSION",
    "StateStore",
    "is_delete",
    "message_seq",
    "message_subject",
    "stored_value",
]

EVENT_HEADER = "Tackroom-Event"
SCHEMA_HEADER = "Tackroom-Schema-Version"
EXPECT_HEADER = "Nats-Expected-Last-Subject-Sequence"
_CACHE_SIZE = 4096
_CACHE_MAX_VALUE = 64 * 1024

Capture = Callable[[], dict[str, str] | None]


STATE_SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class _Known:
    """The last message on a key's subject: ``seq`` 0 if none; ``data`` None when absent."""

    seq: int
    data: bytes | None
    present: bool

    @property
    def revision(self) -> int:
        return self.seq if self.present else 0

    def value(self) -> Any:
        return stored_value(self.data) if self.present and self.data is not None else None


def stored_value(data: bytes) -> Any:
    """The value of a stored revision (``{"schema_version", "value", "old_value"}``)."""
    return json.loads(data)["value"]


def _body(value: Any, old: Any) -> bytes:
    return dumps(
        {"schema_version": STATE_SCHEMA_VERSION, "value": value, "old_value": old}
    ).encode()


def is_delete(msg: Msg) -> bool:
    headers = msg.headers or {}
    return headers.get("KV-Operation") in ("DEL", "PURGE") or "Nats-Marker-Reason" in headers


def message_subject(msg: Msg) -> str:
    """The subject a message was stored under (direct gets name it in a header)."""
    return (msg.headers or {}).get("Nats-Subject") or msg.subject


def message_seq(msg: Msg) -> int:
    headers = msg.headers or {}
    if "Nats-Sequence" in headers:
        return int(headers["Nats-Sequence"])
    return int(msg.metadata.sequence.stream)


class StateStore:
    def __init__(self, link: Link, names: Names, *, capture: Capture) -> None:
        self._link = link
        self._names = names
        self._stream = f"KV_{names.state_bucket}"
        self._capture = capture
        self._cache: OrderedDict[str, _Known] = OrderedDict()

    # -- reads -----------------------------------------------------------------------------
    async def _read(self, subject: str) -> _Known:
        msg = await self._link.last_message(self._stream, subject)
        if msg is None:
            known = _Known(0, None, present=False)
        elif is_delete(msg):
            known = _Known(message_seq(msg), None, present=False)
        else:
            known = _Known(message_seq(msg), bytes(msg.data), present=True)
        self._remember(subject, known)
        return known

    async def _current(self, subject: str) -> tuple[_Known, bool]:
        """The cached revision of a key, or a fresh read; the flag says which."""
        known = self._cache.get(subject)
        if known is None or (known.present and known.data is None):
            return await self._read(subject), True
        self._cache.move_to_end(subject)
        return known, False

    def _remember(self, subject: str, known: _Known) -> None:
        if known.data is not None and len(known.data) > _CACHE_MAX_VALUE:
            known = _Known(known.seq, None, known.present)
        self._cache[subject] = known
        self._cache.move_to_end(subject)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)

    async def get(self, scope: str, key: str) -> StateEntry | None:
        known = await self._read(self._names.state_subject(scope, key))
        if not known.present or known.data is None:
            return None
        return StateEntry(scope, key, stored_value(known.data), known.seq)

    async def entries(self, scope: str, prefix: str) -> list[StateEntry]:
        messages = await self._link.last_per_subject(
            self._stream, self._names.state_scope_filter(scope)
        )
        entries: list[StateEntry] = []
        for msg in messages:
            if is_delete(msg):
                continue
            _, key = self._names.state_from_subject(message_subject(msg))
            if key.startswith(prefix):
                entries.append(StateEntry(scope, key, stored_value(msg.data), message_seq(msg)))
        entries.sort(key=lambda entry: entry.key)
        return entries

    # -- writes ----------------------------------------------------------------------------
    async def _write(self, subject: str, value: Any, known: _Known, *, event: str) -> int:
        """Compare-and-set ``value`` over ``known``; ``WrongLastSequence`` if it moved."""
        headers = {SCHEMA_HEADER: "1", EVENT_HEADER: event, EXPECT_HEADER: str(known.seq)}
        trace = self._capture()
        if trace:
            headers.update(trace)
        if event == "delete":
            headers["KV-Operation"] = "DEL"
        data = _body(value, known.value())
        try:
            ack = await self._link.js_publish(subject, data, headers=headers)
        except WrongLastSequence:
            self._cache.pop(subject, None)
            raise
        present = event != "delete"
        self._remember(subject, _Known(ack.seq, data if present else None, present))
        return ack.seq

    async def set(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None
    ) -> StateEntry:
        value = to_json_value(value, what="state value")
        subject = self._names.state_subject(scope, key)
        known, fresh = await self._current(subject)
        while True:
            if expected_revision is not None and known.revision != expected_revision:
                if not fresh:  # the cache may be stale: check with a fresh read first
                    known, fresh = await self._read(subject), True
                    continue
                raise RevisionConflict(scope, key, expected_revision, known.revision)
            try:
                revision = await self._write(subject, value, known, event="set")
            except WrongLastSequence:
                await _contention_pause()
                known, fresh = await self._read(subject), True
                continue
            return StateEntry(scope, key, value, revision)

    async def update(self, scope: str, key: str, ops: list[UpdateOp]) -> StateEntry:
        subject = self._names.state_subject(scope, key)
        known, _ = await self._current(subject)
        while True:
            value = apply_ops(known.value(), ops)
            try:
                revision = await self._write(subject, value, known, event="update")
            except WrongLastSequence:
                await _contention_pause()
                known = await self._read(subject)
                continue
            return StateEntry(scope, key, value, revision)

    async def delete(self, scope: str, key: str, *, expected_revision: int | None) -> bool:
        subject = self._names.state_subject(scope, key)
        known, fresh = await self._current(subject)
        while True:
            mismatch = expected_revision is not None and known.revision != expected_revision
            if (mismatch or not known.present) and not fresh:
                known, fresh = await self._read(subject), True
                continue
            if mismatch:
                assert expected_revision is not None
                raise RevisionConflict(scope, key, expected_revision, known.revision)
            if not known.present:
                return False
            try:
                await self._write(subject, None, known, event="delete")
            except WrongLastSequence:
                known, fresh = await self._read(subject), True
                continue
            return True


async def _contention_pause() -> None:
    """A moment's jitter after losing a compare-and-set race, so retries spread out."""
    await asyncio.sleep(random.uniform(0, 0.002))
