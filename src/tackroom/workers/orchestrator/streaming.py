"""One model call: stream the provider's frames over a channel, coalesce deltas into live events.

Consecutive deltas of one kind become one ``message_update`` event, flushed when the kind
changes, every ``coalesce_seconds``, at ``coalesce_chars``, and at the end — so a UI sees tokens
promptly without one event per token. The events are live only (:mod:`tackroom.kit.live`): sent
to the subscribers connected now, never stored; while the call streams, a reader that connects
gets a ``message_snapshot`` of what went out so far. The message itself is stored once, whole,
as the step's ``message_complete``. The call ends with the provider's terminal frame;
frames are read typed (:func:`~tackroom.contracts.provider.read_frame`); any failure (no
provider, a broken or aborted stream, a malformed terminal frame, a timeout, an answer whose
tool-call arguments nest deeper than ``MAX_CONTENT_DEPTH``) becomes an assistant message with
``stop_reason == "error"`` and a visible reason, never a hung turn.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from tackroom.contracts.events import MessageSnapshotData, StreamedPart
from tackroom.contracts.messages import AgentMessage, AssistantMessage, ErrorKind
from tackroom.contracts.provider import (
    DoneEvent,
    ErrorEvent,
    FunctionCallDelta,
    MalformedFrame,
    ProviderRequest,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
    read_frame,
    stream_function,
)
from tackroom.engine.errors import (
    ChannelAborted,
    EngineError,
    FunctionNotFound,
    InvalidPayload,
    InvocationTimeout,
    unavailable_cause,
)
from tackroom.engine.jsonvalue import MAX_CONTENT_DEPTH, to_json_value
from tackroom.engine.protocol import Channel, Engine
from tackroom.kit.live import LiveSink, RunLive
from tackroom.workers.orchestrator.record import TurnRecord

DeltaKind = Literal["text", "thinking", "function_call"]

__all__ = ["ModelCaller", "Streamed", "base_request", "error_message"]


_CLOSE_GRACE = 5.0
_ABORT_POLL = 0.25

AbortCheck = Callable[[], Awaitable[bool]]


class _Coalescer:
    """Batches deltas into live ``message_update`` events, and keeps what went out for a
    snapshot (the parts so far, through update ``count``).

    Each model call streams under its own ``stream_id``: a call re-run after a crash gets new
    event ids (and a UI seeing a new ``stream_id`` for a message starts that message over).
    """

    def __init__(self, live: LiveSink, message_id: str, *, seconds: float, chars: int) -> None:
        self._live = live
        self._message_id = message_id
        self.stream_id = uuid.uuid4().hex[:8]
        self.seconds = seconds
        self._chars = chars
        self._kind: DeltaKind | None = None
        self._parts: list[str] = []
        self._size = 0
        self._since = 0.0
        self._count = 0
        self._sent: list[tuple[DeltaKind, list[str]]] = []
        self._lock = asyncio.Lock()

    @property
    def shown(self) -> bool:
        """Whether any delta went out (or waits to go out) as an event."""
        return self._count > 0 or bool(self._parts)

    def snapshot(self) -> MessageSnapshotData:
        """What went out so far: the updates 1 to ``count``, joined by kind."""
        return MessageSnapshotData(
            message_id=self._message_id,
            stream_id=self.stream_id,
            parts=[StreamedPart(kind=kind, text="".join(texts)) for kind, texts in self._sent],
            through=self._count,
        )

    async def add(self, kind: DeltaKind, delta: str) -> None:
        if kind != self._kind:
            await self.flush()
            self._kind = kind
            self._since = time.monotonic()
        self._parts.append(delta)
        self._size += len(delta)
        if self._size >= self._chars or time.monotonic() - self._since >= self.seconds:
            await self.flush()

    async def flush_if_stale(self) -> None:
        """Called on a timer: deltas never wait longer than ``seconds`` when the model pauses."""
        if self._parts and time.monotonic() - self._since >= self.seconds:
            await self.flush()

    async def flush(self) -> None:
        async with self._lock:  # the reader and the ticker both flush; events keep their order
            kind = self._kind
            if not self._parts or kind is None:
                return
            delta, self._parts, self._size = "".join(self._parts), [], 0
            self._count += 1
            self._since = time.monotonic()
            if self._sent and self._sent[-1][0] == kind:
                self._sent[-1][1].append(delta)
            else:
                self._sent.append((kind, [delta]))
            await self._live.update(
                message_id=self._message_id,
                stream_id=self.stream_id,
                kind=kind,
                delta=delta,
                index=self._count,
            )


class ModelCaller:
    def __init__(
        self,
        engine: Engine,
        *,
        timeout: float,
        coalesce_seconds: float,
        coalesce_chars: int,
        channel_capacity: int = 256,
    ) -> None:
        self._engine = engine
        self._timeout = timeout
        self._seconds = coalesce_seconds
        self._chars = coalesce_chars
        self._capacity = channel_capacity

    def live(self, record: TurnRecord) -> RunLive:
        """Where the run's live events go: its session's ``agent::events`` group."""
        return RunLive(self._engine, session_id=record.session_id, run_id=record.run_id)

    async def stream(
        self,
        provider: str,
        request: ProviderRequest,
        live: LiveSink,
        *,
        message_id: str,
        abort_requested: AbortCheck | None = None,
    ) -> Streamed:
        """One call of ``provider::<provider>::stream`` with ``request`` (its ``writer`` is set
        here); deltas go to ``live`` as ``message_update`` events under a new ``stream_id``,
        and a snapshot of them is offered until the call ends."""
        channel = await self._engine.open_channel(capacity=self._capacity)
        request = request.model_copy(update={"writer": channel.ref.to_json()})
        coalescer = _Coalescer(live, message_id, seconds=self._seconds, chars=self._chars)
        async with live.offering(message_id, coalescer.snapshot):
            return await self._stream(provider, request, channel, coalescer, abort_requested)

    async def _stream(
        self,
        provider: str,
        request: ProviderRequest,
        channel: Channel,
        coalescer: _Coalescer,
        abort_requested: AbortCheck | None,
    ) -> Streamed:
        async with asyncio.TaskGroup() as group:
            reader = group.create_task(self._read(channel, coalescer))
            invoke = group.create_task(self._invoke(provider, request))
            ticker = group.create_task(
                self._tick(reader, invoke, channel, coalescer, abort_requested)
            )
            await asyncio.wait({invoke})
            failure = None if invoke.cancelled() else invoke.result()
            if failure is not None:
                await _close_after(reader, channel, grace=0.0 if reader.done() else 0.2)
            else:
                await _close_after(reader, channel, grace=_CLOSE_GRACE)
            ticker.cancel()
        outcome = reader.result()
        aborted = not ticker.cancelled() and ticker.result()
        if aborted:
            message = AssistantMessage(
                content=outcome.content if isinstance(outcome, AssistantMessage) else [],
                stop_reason="aborted",
                error_message="aborted while the model was answering",
            )
        elif isinstance(outcome, AssistantMessage):
            message = outcome
        else:
            kind, text = failure or _no_message(outcome)
            message = error_message(kind, text)
        message.provider = message.provider or provider
        message.model = message.model or request.model
        return Streamed(message, shown=coalescer.shown, stream_id=coalescer.stream_id)

    async def _tick(
        self,
        reader: asyncio.Task[Any],
        invoke: asyncio.Task[Any],
        channel: Channel,
        coalescer: _Coalescer,
        abort_requested: AbortCheck | None,
    ) -> bool:
        """While the stream runs: flush stale deltas; close the stream when an abort arrives.

        Returns whether it aborted the stream.
        """
        # With coalescing off every delta flushes as it comes: the timer only polls the abort.
        tick = min(coalescer.seconds, _ABORT_POLL) if coalescer.seconds > 0 else _ABORT_POLL
        since_poll = 0.0
        while not reader.done():
            await asyncio.sleep(tick)
            await coalescer.flush_if_stale()
            since_poll += tick
            if abort_requested is not None and since_poll >= _ABORT_POLL:
                since_poll = 0.0
                if await abort_requested():
                    await channel.aclose()
                    invoke.cancel()  # a provider that stalls must not hold the turn
                    return True
        return False

    async def _invoke(
        self, provider: str, request: ProviderRequest
    ) -> tuple[ErrorKind, str] | None:
        function = stream_function(provider)
        try:
            # The frames are the answer; the function's own result says nothing more to read.
            await function.send(self._engine, request, timeout=self._timeout)
        except FunctionNotFound as exc:
            return "permanent", f"no provider worker serves {function.id}: {exc}"
        except InvocationTimeout:
            return "transient", f"the model call timed out after {self._timeout:g}s"
        except EngineError as exc:
            if unavailable_cause(exc) is not None:
                raise  # the bus is away, not the model: the step is retried once it is back
            return "transient", f"the model call failed: {exc}"
        return None

    async def _read(
        self, channel: Channel, coalescer: _Coalescer
    ) -> AssistantMessage | _Aborted | None:
        final: AssistantMessage | None = None
        try:
            async for raw in channel:
                try:
                    frame = read_frame(raw)
                except MalformedFrame as exc:
                    await coalescer.flush()
                    final = error_message("permanent", str(exc))
                    continue
                if isinstance(frame, TextDelta):
                    await coalescer.add("text", frame.delta)
                elif isinstance(frame, FunctionCallDelta):
                    await coalescer.add("function_call", frame.arguments_delta)
                elif isinstance(frame, ThinkingDelta):
                    await coalescer.add("thinking", frame.delta)
                elif isinstance(frame, DoneEvent):
                    await coalescer.flush()
                    final = _final_message(frame.message)
                elif isinstance(frame, ErrorEvent):
                    await coalescer.flush()
                    final = error_message(frame.kind, frame.message)
        except ChannelAborted as exc:
            await coalescer.flush()
            return final or _Aborted(exc.reason)
        await coalescer.flush()
        return final


@dataclass(frozen=True, slots=True)
class Streamed:
    """One stream's outcome: the message (an error message when it failed) and whether any of
    its deltas went out to live readers."""

    message: AssistantMessage
    shown: bool
    stream_id: str


def base_request(record: TurnRecord, messages: list[AgentMessage]) -> ProviderRequest:
    """The request for the run's model, tools offered natively (no ``writer`` yet).

    Built from values validated where they were made (the messages, the record's tools): not
    validated again, so a model call does not cost more as the transcript grows.
    """
    return ProviderRequest.model_construct(
        model=record.model,
        system_prompt=record.system_prompt,
        messages=messages,
        tools=[
            ToolSpec.model_construct(
                name=tool.name,
                description=tool.description,
                parameters={k: v for k, v in tool.parameters.items() if not k.startswith("x-")},
            )
            for tool in record.tools
        ],
        session_id=record.session_id,
    )


@dataclass(frozen=True, slots=True)
class _Aborted:
    """The provider aborted its stream before a terminal frame."""

    reason: str


def _final_message(message: AssistantMessage) -> AssistantMessage:
    """The ``done`` frame's message; an error message if its tool calls' arguments nest deeper
    than ``MAX_CONTENT_DEPTH`` (the turn record, session entry and event that carry them must
    stay within ``MAX_DEPTH``)."""
    for call in message.function_calls():
        what = f"the arguments of tool call {call.tool_name!r}"
        try:
            to_json_value(call.arguments, what=what, max_depth=MAX_CONTENT_DEPTH)
        except InvalidPayload as exc:
            return error_message("permanent", f"the model's answer was refused: {exc.message}")
    return message


async def _close_after(reader: asyncio.Task[Any], channel: Channel, *, grace: float) -> None:
    """Let the reader drain what was sent; close the channel if the provider never did."""
    if not reader.done():
        await asyncio.wait({reader}, timeout=grace)
    if not reader.done():
        await channel.aclose()


def _no_message(aborted: _Aborted | None) -> tuple[ErrorKind, str]:
    if aborted is not None:
        return "transient", f"the provider aborted the stream: {aborted.reason}"
    return "transient", "the provider ended the stream without a message"


def error_message(kind: Any, text: str) -> AssistantMessage:
    valid: tuple[ErrorKind, ...] = (
        "auth",
        "rate_limited",
        "context_overflow",
        "transient",
        "permanent",
    )
    return AssistantMessage(  # no content: the error is not an answer the model gave
        content=[],
        stop_reason="error",
        error_kind=kind if kind in valid else "permanent",
        error_message=text,
    )
