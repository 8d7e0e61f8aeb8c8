"""In-process function registry: replicas, round-robin, invocation with span and typed errors.

Backend-neutral: the embedded backend calls handlers through it directly, and a networked backend
uses it for the handlers its own process serves.
"""

from __future__ import annotations

import asyncio
import difflib
import itertools
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Unpack

from pydantic import BaseModel

from tackroom.engine.errors import (
    EngineError,
    FunctionError,
    FunctionNotFound,
    InvalidPayload,
    InvocationError,
    InvocationTimeout,
)
from tackroom.engine.jsonvalue import MAX_RESULT_DEPTH, to_json_value
from tackroom.engine.tracing import EngineTracer
from tackroom.engine.values import (
    FunctionInfo,
    Handler,
    Invocation,
    InvocationKind,
    LazySchema,
    RegisterOptions,
    WorkerInfo,
    reset_invocation,
    set_current_invocation,
)

__all__ = [
    "FunctionRegistry",
    "LocalRegistration",
    "describe_failure",
    "new_registration",
    "trigger_here",
]

_ids = itertools.count(1)


@dataclass(eq=False, slots=True)
class LocalRegistration:
    """One registration of a handler (or trigger); ``unregister`` removes only this one.
    ``hop``: its invocations open no span of their own (see :mod:`tackroom.engine.tracing`)."""

    function_id: str
    handler: Handler | None
    worker: str = "anonymous"
    description: str = ""
    request_schema: dict[str, Any] | LazySchema | None = None
    response_schema: dict[str, Any] | LazySchema | None = None
    on_unregister: Callable[[LocalRegistration], Awaitable[None]] | None = None
    hop: bool = False
    version: str = ""
    contract_version: int | None = None
    id: str = field(default_factory=lambda: f"reg-{next(_ids)}")

    async def unregister(self) -> None:
        if self.on_unregister is not None:
            callback, self.on_unregister = self.on_unregister, None
            await callback(self)


def new_registration(
    function_id: str,
    handler: Handler,
    *,
    on_unregister: Callable[[LocalRegistration], Awaitable[None]],
    **options: Unpack[RegisterOptions],
) -> LocalRegistration:
    """A checked registration, as every backend's ``register_function`` builds it."""
    if not function_id or not isinstance(function_id, str):
        raise ValueError("function_id must be a non-empty string")
    return LocalRegistration(
        function_id=function_id, handler=handler, on_unregister=on_unregister, **options
    )


async def trigger_here(
    registry: FunctionRegistry, function_id: str, payload: Any, *, timeout: float
) -> Any:
    """``trigger`` served by a replica in this process: the payload copied (a model passed by
    reference to a handler that takes models), the handler cancelled at ``timeout``
    (:class:`InvocationTimeout`), any failure an :class:`InvocationError` with its code."""
    registration = registry.pick(function_id)
    if not (
        isinstance(payload, BaseModel) and getattr(registration.handler, "takes_models", False)
    ):
        payload = to_json_value(payload)
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await registry.call(registration, payload)
    except TimeoutError as exc:
        if deadline.expired():
            raise InvocationTimeout(function_id, timeout) from None
        raise InvocationError(function_id, *describe_failure(exc)) from exc
    except Exception as exc:
        raise InvocationError(function_id, *describe_failure(exc)) from exc


def describe_failure(exc: BaseException) -> tuple[str, str]:
    """The ``(code, message)`` a caller sees for a handler's exception."""
    if isinstance(exc, FunctionError):
        return exc.code, exc.message
    code = exc.code if isinstance(exc, EngineError) else "internal"
    return code, f"{type(exc).__name__}: {exc}"


class FunctionRegistry:
    def __init__(self, *, tracer: EngineTracer | None = None) -> None:
        self._tracer = tracer
        self._replicas: dict[str, list[LocalRegistration]] = {}
        self._cursor: dict[str, int] = {}
        self.on_change: Callable[[], None] | None = None

    def add(self, registration: LocalRegistration) -> None:
        self._replicas.setdefault(registration.function_id, []).append(registration)
        if self.on_change is not None:
            self.on_change()

    def remove(self, registration: LocalRegistration) -> None:
        replicas = self._replicas.get(registration.function_id)
        if replicas and registration in replicas:
            replicas.remove(registration)
            if not replicas:
                del self._replicas[registration.function_id]
                self._cursor.pop(registration.function_id, None)

    def served(self) -> set[str]:
        return set(self._replicas)

    def __contains__(self, function_id: str) -> bool:
        return function_id in self._replicas

    def pick(self, function_id: str) -> LocalRegistration:
        replicas = self._replicas.get(function_id)
        if not replicas:
            close = difflib.get_close_matches(function_id, list(self._replicas), n=3, cutoff=0.6)
            raise FunctionNotFound(function_id, close)
        if len(replicas) == 1:
            return replicas[0]
        turn = self._cursor.get(function_id, 0)
        self._cursor[function_id] = turn + 1
        return replicas[turn % len(replicas)]

    async def invoke(
        self,
        function_id: str,
        payload: Any,
        *,
        kind: InvocationKind = "trigger",
        invocation: Invocation | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """:meth:`pick` a replica of ``function_id`` and :meth:`call` it."""
        return await self.call(
            self.pick(function_id), payload, kind=kind, invocation=invocation, headers=headers
        )

    async def call(
        self,
        registration: LocalRegistration,
        payload: Any,
        *,
        kind: InvocationKind = "trigger",
        invocation: Invocation | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Run one handler on an already-copied payload; the result is copied and checked.

        Raises the handler's own exception, or ``FunctionError("invalid_result")`` when the
        result is not JSON.
        """
        function_id = registration.function_id
        handler = registration.handler
        assert handler is not None, "a trigger registration has no handler"
        token = set_current_invocation(invocation or Invocation(function_id, kind))
        try:
            if self._tracer is None:
                result = await handler(payload)
            else:
                with self._tracer.invocation(
                    function_id, kind, payload, headers=headers, hop=registration.hop
                ):
                    result = await handler(payload)
        finally:
            reset_invocation(token)
        if isinstance(result, BaseModel) and isinstance(payload, BaseModel):
            return result  # a model asked by reference is answered by reference (runtime.typed)
        try:
            return to_json_value(
                result, what=f"result of {function_id}", max_depth=MAX_RESULT_DEPTH
            )
        except InvalidPayload as exc:
            raise FunctionError("invalid_result", exc.message) from None

    def functions(self) -> list[FunctionInfo]:
        return [
            FunctionInfo(
                function_id=reg.function_id,
                worker=reg.worker,
                description=reg.description,
                request_schema=reg.request_schema,
                response_schema=reg.response_schema,
                version=reg.version,
                contract_version=reg.contract_version,
            )
            for replicas in self._replicas.values()
            for reg in replicas
        ]

    def workers(self) -> list[WorkerInfo]:
        return WorkerInfo.of(self.functions(), pid=os.getpid(), host=socket.gethostname())
