"""``Harness.add_hook`` by seed 003's lifecycle names, on the topics the turn publishes.

``before_thinking`` is ``before_model_call`` (block the call, or ``replace`` the request),
``after_thinking`` is ``after_model_call`` (block, or ``replace`` the answer), ``before_acting``
is ``before_function_call`` (block the call), ``after_acting`` and ``after_observing`` are
``after_function_call`` (``replace`` the result the model reads), ``on_finished`` is the
``turn_end`` of a turn without function results (observe only). The map is
:data:`tackroom.contracts.hooks.LIFECYCLE_HOOKS`; the topics' own names work too.

A hook is a function on the bus like any other, so it costs nothing until one is added: no hooks
worker boots for a harness with none. A sync function runs in a thread.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Collection
from typing import Any

from tackroom.contracts.hooks import LIFECYCLE_HOOKS, TOPICS
from tackroom.harness.errors import UsageError
from tackroom.kit.hooks.subscribe import HookSpec

__all__ = ["NO_HOOK_POINT", "hook_spec"]

NO_HOOK_POINT = {
    "on_error": "a failing run publishes no hook (yet): read result.error, or the AgentError"
    " event of harness.stream()",
}
"""Seed 003's lifecycle names with no point in the turn to attach to, and what to do instead."""


def hook_spec(
    event: str, function: Callable[[Any], Any], *, taken: Collection[str] = ()
) -> HookSpec:
    """The subscription ``add_hook(event, function)`` makes, or a ``UsageError`` naming the
    known events. Its name (``hook::harness-hooks::<name>``, what a block is attributed to) is
    the event and the function's name, numbered past the names ``taken``."""
    if event in NO_HOOK_POINT:
        raise UsageError(f"add_hook({event!r}): {NO_HOOK_POINT[event]}")
    topic = LIFECYCLE_HOOKS.get(event, event)
    if topic not in TOPICS:
        known = ", ".join([*LIFECYCLE_HOOKS, *TOPICS])
        raise UsageError(f"unknown hook {event!r}: use one of {known}")
    if not callable(function):
        raise UsageError(f"add_hook({event!r}, ...) needs a function of the payload")
    call = _awaited(function)
    if event == "on_finished":
        call = _on_answer(call)
    own = getattr(function, "__name__", "")
    name = f"{event}_{own}" if own.isidentifier() else event
    number = 1
    while name in taken:
        number += 1
        name = f"{event}_{own if own.isidentifier() else 'hook'}_{number}"
    return HookSpec(topic, call, name=name)


def _awaited(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    if inspect.iscoroutinefunction(function):
        return function

    async def call(payload: Any) -> Any:
        value = await asyncio.to_thread(function, payload)
        return await value if inspect.isawaitable(value) else value

    return call


def _on_answer(call: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``turn_end`` only when the turn called no function: the seed's FINISHED."""

    async def finished(payload: Any) -> Any:
        if isinstance(payload, dict) and payload.get("function_results"):
            return None
        return await call(payload)

    return finished
