"""Publish a topic to its subscribers and merge the replies.

- ``first_block_wins`` (a gate): every subscriber is called at once; the replies are read in
  call order and the first that blocks wins (the later calls are cancelled). A subscriber that
  fails, times out or answers something that is not a reply blocks too: a gate fails closed.
- ``transform``: subscribers run one after the other, each seeing the payload the previous one
  returned. One that fails, times out or blocks stops the chain: the result is blocked and its
  payload is ``null``, so a result a failed redactor was meant to change never leaks.
- ``observe``: every subscriber is called at once and awaited; failures are counted, not raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from tackroom.contracts.hooks import (
    HookEvent,
    HookReply,
    PublishRequest,
    PublishResult,
    Subscriber,
)
from tackroom.engine.errors import EngineError, FunctionNotFound, InvocationError, InvocationTimeout

__all__ = ["Outcome", "Trigger", "publish"]

Trigger = Callable[[str, Any, float], Awaitable[Any]]
"""``(function_id, payload, timeout_seconds) -> result``: ``engine.trigger`` or a test double."""


class Outcome:
    """One subscriber's answer: a reply, or why there is none."""

    __slots__ = ("error", "reply")

    def __init__(self, reply: HookReply | None = None, error: str | None = None) -> None:
        self.reply = reply
        self.error = error


async def _call(trigger: Trigger, subscriber: Subscriber, event: Any, timeout: float) -> Outcome:
    fid = subscriber.function_id
    try:
        raw = await trigger(fid, event, timeout)
    except InvocationTimeout:
        return Outcome(error=f"hook {fid} timed out after {timeout * 1000:g} ms")
    except FunctionNotFound:
        return Outcome(error=f"hook {fid} is not registered")
    except InvocationError as exc:
        return Outcome(error=f"hook {fid} failed: [{exc.remote_code}] {exc}")
    except EngineError as exc:
        return Outcome(error=f"hook {fid} failed: {exc}")
    if raw is None:
        return Outcome(reply=HookReply())
    try:
        return Outcome(reply=HookReply.model_validate(raw))
    except ValidationError:
        return Outcome(error=f"hook {fid} answered {type(raw).__name__}, not a hook reply")


def _event(request: PublishRequest, payload: Any) -> Any:
    return HookEvent(topic=request.topic, payload=payload).model_dump(mode="json")


async def publish(
    trigger: Trigger, request: PublishRequest, subscribers: list[Subscriber]
) -> PublishResult:
    """Call ``subscribers`` (already in call order) and merge by ``request.merge_rule``."""
    if not subscribers:
        return PublishResult(blocked=False, payload=request.payload, subscribers=0)
    timeout = request.timeout_ms / 1000
    if request.merge_rule == "transform":
        return await _transform(trigger, request, subscribers, timeout)
    event = _event(request, request.payload)
    tasks = [asyncio.create_task(_call(trigger, s, event, timeout)) for s in subscribers]
    try:
        if request.merge_rule == "observe":
            outcomes = await asyncio.gather(*tasks)
            errors = sum(1 for outcome in outcomes if outcome.error is not None)
            return PublishResult(
                blocked=False, payload=request.payload, subscribers=len(subscribers), errors=errors
            )
        for subscriber, task in zip(subscribers, tasks, strict=True):
            outcome = await task
            blocked = _blocked(subscriber, outcome, request.payload, len(subscribers))
            if blocked is not None:
                return blocked
        return PublishResult(blocked=False, payload=request.payload, subscribers=len(subscribers))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _blocked(
    subscriber: Subscriber, outcome: Outcome, payload: Any, subscribers: int
) -> PublishResult | None:
    """The result when this outcome blocks (an error does), else ``None``."""
    if outcome.error is not None:
        reason = outcome.error
    else:
        assert outcome.reply is not None
        if not outcome.reply.block:
            return None
        reason = outcome.reply.reason or f"blocked by {subscriber.function_id}"
    return PublishResult(
        blocked=True,
        reason=reason,
        blocked_by=subscriber.function_id,
        payload=payload,
        subscribers=subscribers,
        errors=int(outcome.error is not None),
    )


async def _transform(
    trigger: Trigger, request: PublishRequest, subscribers: list[Subscriber], timeout: float
) -> PublishResult:
    payload = request.payload
    for subscriber in subscribers:
        outcome = await _call(trigger, subscriber, _event(request, payload), timeout)
        blocked = _blocked(subscriber, outcome, None, len(subscribers))
        if blocked is not None:
            return blocked
        assert outcome.reply is not None
        if "payload" in outcome.reply.model_fields_set:
            payload = outcome.reply.payload
    return PublishResult(blocked=False, payload=payload, subscribers=len(subscribers))
