"""The server side of a provider, one way for every provider: typed frames out on a channel.

A provider is an ``answer(request, send)`` that sends the frames of its answer through ``send``
(typed :data:`~tackroom.contracts.provider.ProviderEvent` frames; ``send`` is ``None`` when
nothing streams) and returns the finished :class:`AssistantMessage`, or a
:class:`ProviderFailure` (returned or raised). Its two functions are then:

- :func:`serve_stream` (``provider::<name>::stream``): finds the request's channel (a missing or
  bad ``writer`` is an ``invalid_request`` error), sends ``start``, parses the request (one that
  does not parse is answered with an ``error`` frame), runs ``answer``, sends the terminal frame
  — ``done`` with the message or ``error`` with the failure — and closes the channel;
- :func:`serve_complete` (``provider::<name>::complete``): the same ``answer`` without a writer;
  the finished message's JSON, or an error message saying why.

:func:`register_provider` registers both for a worker.

Frames go out as :func:`~tackroom.contracts.provider.frame_json` makes them. A reader that
closed the channel first is no failure of the provider: the result says so (``ok: false``).
Anything else that stops the answer aborts the channel, so the reader learns the stream will not
finish instead of waiting for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from tackroom.contracts.messages import AssistantMessage
from tackroom.contracts.provider import (
    SCHEMA_VERSION,
    DoneEvent,
    ErrorEvent,
    ProviderEvent,
    ProviderRequest,
    StartEvent,
    complete_function,
    frame_json,
    request_field,
    stream_function,
)
from tackroom.engine.errors import ChannelClosed, FunctionError
from tackroom.engine.protocol import ChannelRef, ChannelWriter, Engine
from tackroom.kit.providers.errors import ProviderFailure
from tackroom.runtime.typed import ByReference, describe_validation_error
from tackroom.runtime.worker import WorkerContext

__all__ = [
    "STREAM_OK",
    "Answer",
    "Outcome",
    "Parse",
    "Send",
    "model_of",
    "outcome_json",
    "parse_request",
    "register_provider",
    "serve_complete",
    "serve_stream",
]

STREAM_OK: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "ok": True}
"""``provider::<name>::stream``'s result once its frames are sent."""

Send = Callable[[ProviderEvent], Awaitable[None]]
Outcome = AssistantMessage | ProviderFailure
Answer = Callable[[ProviderRequest, Send | None], Awaitable[Outcome]]
Parse = Callable[[Any], ProviderRequest | ProviderFailure]


def model_of(payload: Any) -> str:
    """The model a request names, read before (or without) parsing it; ``""`` if none."""
    model = request_field(payload, "model")
    return model if isinstance(model, str) else ""


def parse_request(payload: Any) -> ProviderRequest | ProviderFailure:
    """The request (passed by reference in-process, or its JSON), or a ``permanent`` failure
    saying what is wrong with it."""
    if isinstance(payload, ProviderRequest):
        return payload
    try:
        return ProviderRequest.model_validate(payload)
    except ValidationError as exc:
        return ProviderFailure("permanent", f"invalid request: {describe_validation_error(exc)}")


async def _outcome(payload: Any, answer: Answer, parse: Parse, send: Send | None) -> Outcome:
    request = parse(payload)
    if isinstance(request, ProviderFailure):
        return request
    try:
        return await answer(request, send)
    except ProviderFailure as failure:
        return failure


def _writer(engine: Engine, payload: Any, provider: str) -> ChannelWriter:
    raw = request_field(payload, "writer")
    if not isinstance(raw, dict):
        raise FunctionError("invalid_request", f"{stream_function(provider).id} needs writer")
    try:
        ref = ChannelRef.from_json(raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise FunctionError("invalid_request", f"writer is not a channel ref: {exc}") from None
    return engine.channel_writer(ref)


async def serve_stream(
    engine: Engine,
    payload: Any,
    *,
    provider: str,
    answer: Answer,
    model: str | None = None,
    parse: Parse = parse_request,
    who: str | None = None,
) -> dict[str, Any]:
    """Answer one ``provider::<provider>::stream`` call: frames on the request's channel, then
    its result. ``model``: the one named in ``start`` (default: the request's); ``who`` names
    the provider in an abort reason."""
    writer = _writer(engine, payload, provider)

    async def send(frame: ProviderEvent) -> None:
        await writer.send(frame_json(frame))

    async def frames() -> None:
        await send(
            StartEvent(provider=provider, model=model_of(payload) if model is None else model)
        )
        outcome = await _outcome(payload, answer, parse, send)
        if isinstance(outcome, ProviderFailure):
            terminal: ProviderEvent = ErrorEvent(
                kind=outcome.kind, message=outcome.message, retry_after=outcome.retry_after
            )
        else:
            terminal = DoneEvent(message=outcome)
        await send(terminal)

    return await _send_stream(writer, frames, who=who or f"provider {provider!r}")


async def serve_complete(
    payload: Any,
    *,
    provider: str,
    answer: Answer,
    model: str | None = None,
    parse: Parse = parse_request,
) -> dict[str, Any]:
    """Answer one ``provider::<provider>::complete`` call: the finished message's JSON."""
    outcome = await _outcome(payload, answer, parse, None)
    return outcome_json(
        outcome, provider=provider, model=model_of(payload) if model is None else model
    )


async def register_provider(
    ctx: WorkerContext[Any],
    *,
    provider: str,
    answer: Answer,
    model: str | None = None,
    descriptions: tuple[str, str],
    hop: bool,
) -> None:
    """Register ``provider::<provider>::stream`` and ``::complete`` through ``ctx``, both
    answered by ``answer``; ``descriptions`` are theirs, in that order. ``hop``: the answer
    makes a GenAI span that stands for the call."""
    engine = ctx.engine
    who = f"provider {provider!r}"

    async def stream(payload: Any) -> dict[str, Any]:
        return await serve_stream(
            engine, payload, provider=provider, answer=answer, model=model, who=who
        )

    async def complete(payload: Any) -> dict[str, Any]:
        return await serve_complete(payload, provider=provider, answer=answer, model=model)

    for function, handler, description in (
        (stream_function(provider), stream, descriptions[0]),
        (complete_function(provider), complete, descriptions[1]),
    ):
        await ctx.register_function(
            function.id, ByReference(handler), description=description, hop=hop
        )


def outcome_json(outcome: Outcome, *, provider: str, model: str) -> dict[str, Any]:
    """The message as ``complete`` returns it; a failure as a message that ended in error."""
    if isinstance(outcome, ProviderFailure):
        outcome = AssistantMessage(
            stop_reason="error",
            error_kind=outcome.kind,
            error_message=outcome.message,
            provider=provider,
            model=model,
        )
    return outcome.model_dump(mode="json")


async def _send_stream(
    writer: ChannelWriter, frames: Callable[[], Awaitable[None]], *, who: str
) -> dict[str, Any]:
    """Send ``frames()`` and close; ``who`` names the provider in the abort reason."""
    ended = False
    try:
        await frames()
        ended = True
        await writer.close()
    except ChannelClosed:
        ended = True
        return {**STREAM_OK, "ok": False, "error": "the reader closed the channel"}
    finally:
        if not ended:
            with contextlib.suppress(ChannelClosed):
                await writer.abort(f"{who} stopped mid-stream")
    return dict(STREAM_OK)
