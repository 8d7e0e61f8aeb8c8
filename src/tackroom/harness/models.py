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

from tackroom.contracts.messages import Usage
from tackroom.contracts.provider import ProviderRequest
from tackroom.kit.genai import model_call_span
from tackroom.kit.providers.catalog import Prices
from tackroom.kit.providers.errors import ProviderFailure
from tackroom.kit.providers.sink import StreamSink
from tackroom.kit.providers.streaming import Outcome, Send, register_provider
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

    async def chunks(request: ProviderRequest, sink: StreamSink) -> None:
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

    async def answer(request: ProviderRequest, send: Send | None) -> Outcome:
        sink = StreamSink(send)
        with model_call_span(provider=provider, model=model_name, request=request) as span:
            try:
                await chunks(request, sink)
                message = sink.finish(provider=provider, model=model_name, prices=Prices())
            except ProviderFailure as exc:
                span.failed(exc.kind, exc.message)
                return exc
            except Exception as exc:
                span.failed("permanent", _describe(exc))
                return ProviderFailure("permanent", _describe(exc))
            span.answered(
                model=model_name,
                stop_reason=message.stop_reason,
                usage=message.usage,
                message=message,
            )
            return message

    async def start(ctx: WorkerContext[_NoConfig]) -> None:
        await register_provider(
            ctx,
            provider=provider,
            model=model_name,
            answer=answer,
            descriptions=(
                f"Stream the Python model {provider!r}'s answer as provider frames.",
                f"The Python model {provider!r}'s finished answer.",
            ),
            hop=True,  # the GenAI span of ``answer`` stands for the call
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
