"""Register a hook in a few lines: a function on the bus, subscribed to a topic.

In a worker's ``start``::

    from tackroom.hooks import block, hook, replace

    async def redact(result):                      # the topic's payload
        return replace(scrub(result))              # or block("why"), or None: no change

    await hook(ctx, "after_function_call", redact)

or a whole worker that does nothing else::

    @on("before_function_call", priority=-10)
    async def gate(call): ...

    WORKER = hook_worker("pii-guard", gate, after_function_call=redact)

The function is registered as ``hook::<worker>::<name>`` (``hook_function``) and subscribed
through the hooks worker's ``SUBSCRIBE``; when the worker stops it is unsubscribed first, then
unregistered, so a publisher never meets a subscription whose function is already gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.hooks import (
    SUBSCRIBE,
    UNSUBSCRIBE,
    HookReply,
    UnsubscribeRequest,
    hook_function,
)
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine, Registration
from tackroom.runtime.typed import request_for
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = [
    "Hook",
    "HookFunction",
    "HookSpec",
    "HookWorkerConfig",
    "block",
    "hook",
    "hook_worker",
    "on",
    "replace",
]

_log = logging.getLogger("tackroom.hooks")

HookFunction = Callable[[Any], Awaitable[Any]]
"""Takes the topic's payload; returns ``None``, :func:`block`, :func:`replace` or a reply dict."""

_REPLY_KEYS = frozenset(HookReply.model_fields)
_CALL_TIMEOUT = 10.0


def block(reason: str) -> dict[str, Any]:
    """A reply that blocks (a gate's ``first_block_wins``, or a transform)."""
    return {"block": True, "reason": reason}


def replace(payload: Any) -> dict[str, Any]:
    """A transform's reply: the next subscriber (and then the publisher) gets ``payload``."""
    return {"payload": payload}


def _reply(function_id: str, value: Any) -> Any:
    if value is None or isinstance(value, HookReply):
        return None if value is None else value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, dict) and set(value) <= _REPLY_KEYS:
        return value
    raise TypeError(
        f"hook {function_id} returned {type(value).__name__} with keys "
        f"{sorted(value) if isinstance(value, dict) else '-'}: return None, block(reason) or "
        "replace(payload)"
    )


class Hook:
    """A registered, subscribed hook; :meth:`remove` undoes both (the worker's shutdown does)."""

    def __init__(
        self, engine: Engine, registration: Registration, *, topic: str, function_id: str
    ) -> None:
        self._engine = engine
        self._registration: Registration | None = registration
        self.topic = topic
        self.function_id = function_id

    async def remove(self) -> None:
        """Unsubscribe, then unregister the function. Idempotent; failures are logged."""
        registration, self._registration = self._registration, None
        if registration is None:
            return
        request = UnsubscribeRequest(topic=self.topic, function_id=self.function_id)
        try:
            await UNSUBSCRIBE.call(self._engine, request, timeout=_CALL_TIMEOUT)
        except EngineError as exc:
            _log.warning(
                "hook %s: unsubscribing from %s failed: %s", self.function_id, self.topic, exc
            )
        await registration.unregister()

    async def _hold(self, started: asyncio.Event) -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            await self.remove()


async def hook(
    ctx: WorkerContext[Any],
    topic: str,
    function: HookFunction,
    *,
    name: str | None = None,
    priority: int = 0,
    description: str = "",
) -> Hook:
    """Register ``function`` as ``hook::<worker>::<name>`` and subscribe it to ``topic``.

    ``name`` defaults to the function's ``__name__``; lower ``priority`` runs first.
    """
    default = getattr(function, "__name__", "")
    function_id = hook_function(ctx.name, name or (default if default.isidentifier() else topic)).id

    async def handler(event: Any) -> Any:
        payload = event.get("payload") if isinstance(event, dict) else None
        return _reply(function_id, await function(payload))

    registration = await ctx.engine.register_function(
        function_id,
        handler,
        description=description or f"Hook on {topic}.",
        worker=ctx.name,
    )
    handle = Hook(ctx.engine, registration, topic=topic, function_id=function_id)
    try:
        request = request_for(SUBSCRIBE, topic=topic, function_id=function_id, priority=priority)
        await SUBSCRIBE.call(ctx.engine, request, timeout=_CALL_TIMEOUT)
    except BaseException:
        await registration.unregister()
        raise
    started = asyncio.Event()  # a task cancelled before its first step would skip its `finally`
    ctx.spawn(handle._hold(started), name=f"hook {function_id}")
    await started.wait()
    return handle


class HookWorkerConfig(WorkerConfig):
    """A hook-only worker takes no options."""


@dataclass(frozen=True, slots=True)
class HookSpec:
    """A function marked for a topic by :func:`on`; still callable as the function."""

    topic: str
    function: HookFunction
    priority: int = 0
    name: str | None = None

    async def __call__(self, payload: Any) -> Any:
        return await self.function(payload)


def on(
    topic: str, *, priority: int = 0, name: str | None = None
) -> Callable[[HookFunction], HookSpec]:
    """Decorate a hook function for :func:`hook_worker`: ``@on("turn_end")``."""

    def mark(function: HookFunction) -> HookSpec:
        return HookSpec(topic, function, priority, name)

    return mark


def hook_worker(
    name: str, *specs: HookSpec, description: str = "", **by_topic: HookFunction
) -> WorkerSpec[HookWorkerConfig]:
    """A worker whose only job is hooks: ``@on``-decorated functions and/or ``topic=function``."""
    every = [*specs, *(HookSpec(topic, function) for topic, function in by_topic.items())]

    async def start(ctx: WorkerContext[HookWorkerConfig]) -> None:
        for spec in every:
            await hook(ctx, spec.topic, spec.function, name=spec.name, priority=spec.priority)

    return WorkerSpec(
        name=name,
        description=description or f"Hooks on {', '.join(sorted({s.topic for s in every}))}.",
        config_model=HookWorkerConfig,
        start=start,
    )
