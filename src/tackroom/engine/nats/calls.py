"""Functions over NATS request/reply: one subject per function id, one queue group.

Each process subscribes once per function id it serves (queue group ``tackroom``), so NATS
spreads calls across processes; inside a process the ``FunctionRegistry`` picks a replica
round-robin. A call is ``{"schema_version": 1, "function_id", "payload"}`` with the caller's
timeout in ``Tackroom-Timeout`` and its W3C ``traceparent``/``baggage`` as headers; the answer is
``{"schema_version": 1, "ok": true, "result"}`` or ``{"schema_version": 1, "ok": false,
"error": <EngineError.to_wire()>}``. The serving side cancels the handler at the caller's
deadline. No subscriber at all is ``FunctionNotFound`` (NATS answers "no responders").

A call of a function this process serves is made in process, as the embedded engine makes it
(models by reference where the handler takes them, the trace carried by the context), with no
round trip through the server: a process prefers its own replica. Calls from processes that do
not serve the function are still spread over the queue group.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import logging
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from tackroom.engine.errors import (
    EngineError,
    FunctionNotFound,
    InvocationError,
    InvocationTimeout,
    error_from_wire,
)
from tackroom.engine.functions import FunctionRegistry, describe_failure, trigger_here
from tackroom.engine.jsonvalue import dumps, to_json_value
from tackroom.engine.nats.catalog import Catalog
from tackroom.engine.nats.link import Link, NoResponders
from tackroom.engine.nats.naming import Names
from tackroom.engine.protocol import DEFAULT_TIMEOUT
from tackroom.engine.tracing import EngineTracer

__all__ = ["CALL_SCHEMA_VERSION", "FunctionCalls"]

log = logging.getLogger(__name__)

CALL_SCHEMA_VERSION = 1
TIMEOUT_HEADER = "Tackroom-Timeout"
QUEUE_GROUP = "tackroom"


class FunctionCalls:
    def __init__(
        self,
        link: Link,
        names: Names,
        registry: FunctionRegistry,
        catalog: Catalog,
        *,
        tracer: EngineTracer | None,
    ) -> None:
        self._link = link
        self._names = names
        self._registry = registry
        self._catalog = catalog
        self._tracer = tracer
        self._subs: dict[str, Subscription] = {}
        self._serving: set[asyncio.Task[None]] = set()

    # -- serving ---------------------------------------------------------------------------
    async def serve(self, function_id: str) -> None:
        """Subscribe for ``function_id`` (once per process); the server knows it on return."""
        if function_id in self._subs:
            return
        nc = self._link.nc
        sub = await nc.subscribe(
            self._names.function_subject(function_id), queue=QUEUE_GROUP, cb=self._on_call
        )
        self._subs[function_id] = sub
        await nc.flush()

    async def unserve(self, function_id: str) -> None:
        sub = self._subs.pop(function_id, None)
        if sub is not None:
            await sub.unsubscribe()
            await self._link.nc.flush()

    async def close(self) -> None:
        for function_id in list(self._subs):
            sub = self._subs.pop(function_id)
            try:
                await sub.unsubscribe()
            except Exception:  # the connection may already be gone
                log.debug("unsubscribe %s failed at close", function_id, exc_info=True)
        tasks = list(self._serving)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _on_call(self, msg: Msg) -> None:
        task = asyncio.create_task(self._answer(msg), name="tackroom-nats-call")
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)

    async def _answer(self, msg: Msg) -> None:
        if not msg.reply:
            return
        headers = dict(msg.headers or {})
        function_id = "?"
        try:
            request = json.loads(msg.data)
            function_id = str(request["function_id"])
            timeout = float(headers.pop(TIMEOUT_HEADER, DEFAULT_TIMEOUT))
            reply: dict[str, Any]
            deadline = asyncio.timeout(timeout)
            try:
                async with deadline:
                    result = await self._registry.invoke(
                        function_id, request.get("payload"), headers=headers or None
                    )
                reply = {"schema_version": CALL_SCHEMA_VERSION, "ok": True, "result": result}
            except TimeoutError as exc:
                if deadline.expired():
                    error: EngineError = InvocationTimeout(function_id, timeout)
                else:
                    error = InvocationError(function_id, *describe_failure(exc))
                reply = _failure(error)
            except FunctionNotFound as exc:
                reply = _failure(exc)
            except Exception as exc:
                reply = _failure(InvocationError(function_id, *describe_failure(exc)))
            data = dumps(reply).encode()
        except (ValueError, KeyError, TypeError) as exc:
            data = dumps(
                _failure(InvocationError(function_id, "invalid_request", str(exc)))
            ).encode()
        try:
            await self._link.publish(msg.reply, data)
        except EngineError:
            log.debug("could not answer a call of %s: connection lost", function_id)

    # -- calling ---------------------------------------------------------------------------
    async def trigger(self, function_id: str, payload: Any, *, timeout: float) -> Any:
        if function_id in self._subs and function_id in self._registry:
            return await trigger_here(self._registry, function_id, payload, timeout=timeout)
        payload = to_json_value(payload)
        data = dumps(
            {"schema_version": CALL_SCHEMA_VERSION, "function_id": function_id, "payload": payload}
        ).encode()
        headers = {TIMEOUT_HEADER: repr(float(timeout))}
        if self._tracer is not None:
            headers.update(self._tracer.capture(payload))
        try:
            msg = await self._link.request(
                self._names.function_subject(function_id), data, headers=headers, timeout=timeout
            )
        except NoResponders:
            raise FunctionNotFound(function_id, await self._suggestions(function_id)) from None
        except TimeoutError:
            raise InvocationTimeout(function_id, timeout) from None
        reply = json.loads(msg.data)
        if reply.get("ok"):
            return reply.get("result")
        raise error_from_wire(reply["error"])

    async def _suggestions(self, function_id: str) -> list[str]:
        try:
            known = {info.function_id for info in await self._catalog.functions()}
        except EngineError:
            return []
        return difflib.get_close_matches(function_id, sorted(known), n=3, cutoff=0.6)


def _failure(error: EngineError) -> dict[str, Any]:
    return {"schema_version": CALL_SCHEMA_VERSION, "ok": False, "error": error.to_wire()}
