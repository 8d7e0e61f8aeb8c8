"""A function handler that records every call it serves, for assertions in tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import baggage, trace

from tackroom.engine import Invocation, current_invocation
from tackroom.testing.waiting import DEFAULT_WAIT, wait_until

__all__ = ["Call", "RecordingHandler", "Responder"]


@dataclass(slots=True)
class Call:
    """One call a :class:`RecordingHandler` served, as seen inside the handler."""

    payload: Any
    invocation: Invocation | None
    baggage: dict[str, object] = field(default_factory=dict)
    trace_id: int = 0
    span_id: int = 0
    finished: bool = False
    cancelled: bool = False

    @property
    def kind(self) -> str | None:
        return self.invocation.kind if self.invocation else None

    @property
    def attempt(self) -> int | None:
        return self.invocation.attempt if self.invocation else None

    @property
    def message_id(self) -> str | None:
        return self.invocation.message_id if self.invocation else None

    @property
    def group(self) -> str | None:
        return self.invocation.group if self.invocation else None


Responder = Callable[[Call], Awaitable[Any]]
"""Decides a recorded call's outcome: return a result or raise."""


class RecordingHandler:
    """An engine handler recording each call (payload, invocation, baggage, span ids).

    ``respond`` (async, given the :class:`Call`) produces the result or raises; without one the
    handler returns ``None``. A call is ``finished`` once ``respond`` returned or raised, and
    ``cancelled`` if the engine cancelled it.
    """

    def __init__(self, respond: Responder | None = None) -> None:
        self.respond = respond
        self.calls: list[Call] = []

    async def __call__(self, payload: Any) -> Any:
        span_context = trace.get_current_span().get_span_context()
        call = Call(
            payload=payload,
            invocation=current_invocation(),
            baggage=dict(baggage.get_all()),
            trace_id=span_context.trace_id,
            span_id=span_context.span_id,
        )
        self.calls.append(call)
        try:
            if self.respond is None:
                return None
            return await self.respond(call)
        except asyncio.CancelledError:
            call.cancelled = True
            raise
        finally:
            call.finished = True

    @property
    def payloads(self) -> list[Any]:
        return [call.payload for call in self.calls]

    async def wait_for_calls(self, count: int, *, timeout: float = DEFAULT_WAIT) -> list[Call]:
        """Wait until at least ``count`` calls started; returns all calls so far."""
        await wait_until(
            lambda: len(self.calls) >= count,
            timeout=timeout,
            message=lambda: f"{count} calls; got {len(self.calls)}: {self.payloads!r}",
        )
        return list(self.calls)

    async def wait_for_finished(self, count: int, *, timeout: float = DEFAULT_WAIT) -> list[Call]:
        """Wait until at least ``count`` calls finished (returned, raised or were cancelled)."""
        await wait_until(
            lambda: sum(call.finished for call in self.calls) >= count,
            timeout=timeout,
            message=lambda: f"{count} finished calls; got {self.calls!r}",
        )
        return list(self.calls)
