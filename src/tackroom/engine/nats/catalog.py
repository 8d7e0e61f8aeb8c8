"""The function catalog: one KV entry per engine process, refreshed while the process lives.

Each engine keeps ``<ns>_catalog.<instance>`` up to date with its registrations (functions and
the triggers it holds). The bucket's ``max_age`` is three heartbeats and every process re-puts
its entry each heartbeat (and at once after a reconnect), so a killed worker's functions vanish
from ``engine::functions::list`` within three heartbeats. A clean close removes the entry.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from tackroom.engine.errors import EngineError
from tackroom.engine.jsonvalue import dumps
from tackroom.engine.nats.link import Link
from tackroom.engine.nats.naming import Names
from tackroom.engine.nats.state import is_delete
from tackroom.engine.protocol import FunctionInfo, WorkerInfo

__all__ = ["CATALOG_SCHEMA_VERSION", "Catalog", "TriggerHold"]

log = logging.getLogger(__name__)

CATALOG_SCHEMA_VERSION = 1

TriggerHold = tuple[str, str, str]
"""``(kind, source, function_id)`` of a trigger a process holds."""


class Catalog:
    def __init__(
        self,
        link: Link,
        names: Names,
        *,
        heartbeat: float,
        functions: Callable[[], list[FunctionInfo]],
        triggers: Callable[[], list[TriggerHold]],
    ) -> None:
        self._link = link
        self._names = names
        self._heartbeat = heartbeat
        self._functions = functions
        self._triggers = triggers
        self.instance = uuid.uuid4().hex
        self._stream = f"KV_{names.catalog_bucket}"
        self._subject = f"$KV.{names.catalog_bucket}.{self.instance}"
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def entry(self) -> dict[str, Any]:
        return {
            "schema_version": CATALOG_SCHEMA_VERSION,
            "instance": self.instance,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "heartbeat": self._heartbeat,
            "updated_at": time.time(),
            "functions": [
                {
                    "function_id": info.function_id,
                    "worker": info.worker,
                    "description": info.description,
                    "request_schema": info.request_schema,
                    "response_schema": info.response_schema,
                    "version": info.version,
                    "contract_version": info.contract_version,
                }
                for info in self._functions()
            ],
            "triggers": [
                {"kind": kind, "source": source, "function_id": function_id}
                for kind, source, function_id in self._triggers()
            ],
        }

    async def publish(self) -> None:
        """Put this process's entry now (after a registration change, or as a heartbeat)."""
        async with self._lock:
            await self._link.js_publish(self._subject, dumps(self.entry()).encode())

    def start(self) -> None:
        self._task = self._link.spawn(self._beat(), name="tackroom-nats-catalog")
        self._link.on_reconnect(self._refresh_after_reconnect)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat)
            try:
                await self.publish()
            except EngineError as exc:
                log.debug("catalog heartbeat failed: %s", exc)

    async def _refresh_after_reconnect(self) -> None:
        for delay in (0.0, 0.25, 0.5, 1.0, 2.0):
            await asyncio.sleep(delay)
            try:
                await self.publish()
                return
            except EngineError as exc:
                log.debug("catalog refresh after reconnect failed: %s", exc)

    async def remove(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        async with self._lock:
            await self._link.js_publish(
                self._subject, b"", headers={"KV-Operation": "PURGE", "Nats-Rollup": "sub"}
            )

    async def entries(self) -> list[dict[str, Any]]:
        """Every live process's entry (an entry silent for three heartbeats is dead)."""
        messages = await self._link.last_per_subject(
            self._stream, f"$KV.{self._names.catalog_bucket}.>"
        )
        now = time.time()
        live: list[dict[str, Any]] = []
        for msg in messages:
            if is_delete(msg) or not msg.data:
                continue
            entry = json.loads(msg.data)
            if entry.get("schema_version") != CATALOG_SCHEMA_VERSION:
                continue
            if now - float(entry["updated_at"]) > 3 * float(entry["heartbeat"]):
                continue
            live.append(entry)
        return live

    async def functions(self) -> list[FunctionInfo]:
        return [info for entry in await self.entries() for info in _functions_of(entry)]

    async def workers(self) -> list[WorkerInfo]:
        """One ``WorkerInfo`` per worker name and process serving it."""
        found: list[WorkerInfo] = []
        for entry in await self.entries():
            found.extend(WorkerInfo.of(_functions_of(entry), pid=entry["pid"], host=entry["host"]))
        found.sort(key=lambda info: (info.name, info.host, info.pid))
        return found

    async def holders(self, hold: TriggerHold) -> int:
        """How many other live processes hold the trigger ``hold``."""
        kind, source, function_id = hold
        count = 0
        for entry in await self.entries():
            if entry["instance"] == self.instance:
                continue
            for item in entry.get("triggers", []):
                if (item["kind"], item["source"], item["function_id"]) == (
                    kind,
                    source,
                    function_id,
                ):
                    count += 1
        return count


def _functions_of(entry: dict[str, Any]) -> list[FunctionInfo]:
    """An entry's functions; ``version`` and ``contract_version`` are optional (an engine that
    announces none, as before they existed, still lists)."""
    return [
        FunctionInfo(
            function_id=item["function_id"],
            worker=item["worker"],
            description=item["description"],
            request_schema=item["request_schema"],
            response_schema=item["response_schema"],
            version=str(item.get("version") or ""),
            contract_version=_version(item.get("contract_version")),
        )
        for item in entry["functions"]
    ]


def _version(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
