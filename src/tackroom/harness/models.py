"""A model as a Python object: a small streaming protocol, served as a provider worker.

``Harness(model=my_model)`` accepts any object with a ``name`` and a ``stream(request)`` that
yields pieces of its answer — text as ``str``, :class:`ToolCall`, :class:`Thinking`, and
:class:`~tackroom.contracts.messages.Usage`. The harness serves it as ``provider::<name>::stream``
and ``::complete``, so it goes through the same gate, budget and events as a real provider::

    class Echo:
        name = "echo"

        async def stream(self, request: ProviderRequest) -> AsyncIterator[ModelChunk]:
            yield "you said: " + text_of(request.messages[-1].content)

An exception raised by ``stream`` ends the answer as a provider error the run reports (kind
``permanent``: not retried). ``tackroom.testing.FunctionModel`` builds one from a function.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from tackroom.contracts.messages import Usage
from tackroom.contracts.provider import ProviderRequest, complete_function, stream_function
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import ChannelRef
from tackroom.kit.genai import model_call_span
from tackroom.kit.providers.catalog import Prices
from tackroom.kit.providers.errors import ProviderFailure
from tackroom.kit.providers.sink import StreamSink
from tackroom.kit.providers.streaming import send_stream
from tackroom.runtime.typed import ByReference, describe_validation_error
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = ["ModelChunk", "StreamingModel", "Thinking", "ToolCall", "model_worker"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model calls the tool ``name`` (the name it was offered) with ``arguments``."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Thinking:
    text: str
    signature: str | None = None


ModelChunk = str | ToolCall | Thinking | Usage


@runtime_checkable
class StreamingModel(Protocol):
    """What ``Harness(model=...)`` accepts besides a ``PROVIDER:MODEL`` string."""

    @property
    def name(self) -> str:
        """The provider name it is served under (``provider::<name>::stream``)."""
        ...

    def stream(self, request: ProviderRequest) -> AsyncIterator[ModelChunk]: ...


class _NoConfig(WorkerConfig):
    pass


def model_worker(model: StreamingModel, *, model_name: str) -> WorkerSpec[Any]:
    """A provider worker serving ``model`` (messages say ``provider=<name>, model=model_name``)."""
    provider = model.name

    async def answer(request: ProviderRequest, sink: StreamSink) -> None:
        index = 0
        async for chunk in model.stream(request):
            if isinstance(chunk, str):
                await sink.text(chunk)
            elif isinstance(chunk, ToolCall):
                arguments = (
                    chunk.arguments
                    if isinstance(chunk.arguments, str)
                    else json.dumps(chunk.arguments, ensure_ascii=False)
                )
                await sink.call(index, id=chunk.id, name=chunk.name, arguments=arguments)
                index += 1
            elif isinstance(chunk, Thinking):
                await sink.thinking(chunk.text, signature=chunk.signature)
            elif isinstance(chunk, Usage):
                sink.usage(
                    input_tokens=chunk.input_tokens,
                    output_tokens=chunk.output_tokens,
                    cache_read_tokens=chunk.cache_read_tokens,
                    cache_write_tokens=chunk.cache_write_tokens,
                    cost_usd=chunk.cost_usd or None,
                )
            else:
                raise TypeError(
                    f"model {provider!r} yielded {type(chunk).__name__}: yield str, ToolCall,"
                    " Thinking or Usage"
                )
        sink.stop("end")

    def parse(payload: Any) -> ProviderRequest:
        if isinstance(payload, ProviderRequest):
            return payload
        try:
            return ProviderRequest.model_validate(payload)
        except ValidationError as exc:
            raise FunctionError("invalid_request", describe_validation_error(exc)) from None

    async def finished(request: ProviderRequest, sink: StreamSink) -> dict[str, Any]:
        with model_call_span(provider=provider, model=model_name, request=request) as span:
            try:
                await answer(request, sink)
                message = sink.finish(provider=provider, model=model_name, prices=Prices())
            except ProviderFailure as exc:
                span.failed(exc.kind, exc.message)
                return {"type": "error", "kind": exc.kind, "message": exc.message}
            except Exception as exc:
                span.failed("permanent", _describe(exc))
                return {"type": "error", "kind": "permanent", "message": _describe(exc)}
            span.answered(
                model=model_name,
                stop_reason=message.stop_reason,
                usage=message.usage,
                message=message,
            )
            return {"type": "done", "message": message.model_dump(mode="json")}

    async def start(ctx: WorkerContext[_NoConfig]) -> None:
        engine = ctx.engine

        async def handle_stream(payload: Any) -> dict[str, Any]:
            request = parse(payload)
            if request.writer is None:
                raise FunctionError(
                    "invalid_request", f"{stream_function(provider).id} needs writer"
                )
            writer = engine.channel_writer(ChannelRef.from_json(request.writer))

            async def frames() -> None:
                await writer.send({"type": "start", "provider": provider, "model": model_name})
                await writer.send(await finished(request, StreamSink(writer.send)))

            return await send_stream(writer, frames, who=f"model {provider!r}")

        async def handle_complete(payload: Any) -> dict[str, Any]:
            frame = await finished(parse(payload), StreamSink(None))
            if frame["type"] == "done":
                message: dict[str, Any] = frame["message"]
                return message
            return {
                "schema_version": 1,
                "role": "assistant",
                "content": [],
                "stop_reason": "error",
                "error_kind": frame["kind"],
                "error_message": frame["message"],
                "provider": provider,
                "model": model_name,
            }

        await ctx.register_function(
            stream_function(provider).id,
            ByReference(handle_stream),
            description=f"Stream the Python model {provider!r}'s answer as provider frames.",
            hop=True,  # the GenAI span of ``finished`` stands for the call
        )
        await ctx.register_function(
            complete_function(provider).id,
            ByReference(handle_complete),
            description=f"The Python model {provider!r}'s finished answer.",
            hop=True,
        )

    return WorkerSpec(
        name=provider,
        description=f"The Python model object {type(model).__name__} as provider {provider!r}.",
        config_model=_NoConfig,
        start=start,
    )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
