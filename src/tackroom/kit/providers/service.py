"""One profile served on the bus: ``provider::<name>::stream``, ``::complete`` and ``::check``.

The service owns what every provider shares — request parsing, the channel protocol, keys,
the rate limit, retries, the fallback model, the catalog and cost — and hands one attempt at a
time to a :class:`WireAdapter`, the only part that knows an SDK.

A call (served by :func:`~tackroom.kit.providers.streaming.serve_stream`): ``start`` frame → for
each attempt: keys, rate limit, ``adapter.run`` feeding a :class:`StreamSink` (frames go out as
they arrive) → ``usage``, ``stop``, ``done``. A failure
**before any content frame was sent** is retried by its kind (see :func:`retry_delay`); once
content went out, a failure ends the stream with an ``error`` frame and is **not** retried —
the reader already showed the partial answer, and a second answer would repeat or contradict
it. The orchestrator decides what to do with an errored turn. After the retries of a
``rate_limited`` or ``transient`` failure are used up, ``fallback_model`` gets one attempt.
``complete`` runs the same code without a writer; nothing is shown, so a failure there is
always retryable by kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from tackroom.contracts.messages import AssistantMessage
from tackroom.contracts.provider import (
    CheckResult,
    ProviderProfile,
    ProviderRequest,
    StopEvent,
    UsageEvent,
    check_function,
    complete_function,
    profile_function,
    stream_function,
)
from tackroom.engine.errors import ChannelClosed
from tackroom.engine.protocol import Engine
from tackroom.kit.genai import ModelCallSpan, model_call_span
from tackroom.kit.providers.catalog import CatalogClient, ModelInfo
from tackroom.kit.providers.config import ProfileSettings, RateLimitSettings, RetrySettings
from tackroom.kit.providers.errors import ProviderFailure, classify_exception
from tackroom.kit.providers.keys import KeySource
from tackroom.kit.providers.ratelimit import RateLimiter, estimate_tokens
from tackroom.kit.providers.retry import DEFAULT_RUNTIME, Runtime, retry_delay
from tackroom.kit.providers.sink import StreamSink
from tackroom.kit.providers.streaming import Outcome, Send, serve_complete, serve_stream
from tackroom.runtime.typed import ByReference

__all__ = ["ProviderService", "WireAdapter", "WireCall"]

_log = logging.getLogger("tackroom.providers")

Handler = Callable[[Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class WireCall:
    """One attempt: the request, the model to ask (maybe the fallback), the key to use."""

    request: ProviderRequest
    model: str
    key: str
    info: ModelInfo


class WireAdapter(Protocol):
    """The SDK side of a profile: one attempt at a time, everything else is the service's."""

    async def run(self, call: WireCall, sink: StreamSink) -> None:
        """Stream one answer into ``sink`` (recording usage and the stop reason) or raise."""
        ...

    async def aclose(self) -> None: ...


class ProviderService:
    """A profile (and its aliases) served with one adapter, key source, limiter and catalog."""

    def __init__(
        self,
        *,
        engine: Engine,
        name: str,
        profile: ProfileSettings,
        retry: RetrySettings,
        rate_limit: RateLimitSettings,
        adapter: WireAdapter,
        worker: str,
        runtime: Runtime = DEFAULT_RUNTIME,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.profile = profile
        self.names = [name, *profile.aliases]
        self.worker = worker
        self._engine = engine
        self._retry = retry
        self._adapter = adapter
        self._runtime = runtime
        self._keys = KeySource(engine, profile, name=name, clock=runtime.clock, environ=environ)
        self._catalog = CatalogClient(
            engine,
            profile.catalog_provider or name,
            clock=runtime.clock,
            enabled=profile.catalog,
            profile=name,
        )
        self._limiter = RateLimiter(rate_limit, clock=runtime.clock, sleep=runtime.sleep)
        self._count_tokens = rate_limit.tokens_per_minute is not None

    @property
    def keys(self) -> KeySource:
        return self._keys

    @property
    def limiter(self) -> RateLimiter:
        return self._limiter

    def table(self) -> list[tuple[str, Handler, str, bool]]:
        """``(function id, handler, description, hop)`` for every name of this profile."""
        rows: list[tuple[str, Handler, str, bool]] = []
        for provider in self.names:
            for function, handler in (
                (stream_function(provider), self.handle_stream),
                (complete_function(provider), self.handle_complete),
                (check_function(provider), self.handle_check),
                (profile_function(provider), self.handle_profile),
            ):
                bound = self._bind(handler, provider)
                rows.append((function.id, bound, function.description, function.hop))
        return rows

    @staticmethod
    def _bind(method: Callable[[Any, str], Awaitable[Any]], provider: str) -> Handler:
        async def handler(payload: Any) -> Any:
            return await method(payload, provider)

        return ByReference(handler)

    # -- handlers ----------------------------------------------------------------------------
    async def handle_stream(self, payload: Any, provider: str) -> dict[str, Any]:
        async def answer(request: ProviderRequest, send: Send | None) -> Outcome:
            outcome = await self.answer(request, StreamSink(send), provider)
            if send is not None and isinstance(outcome, AssistantMessage):
                await send(UsageEvent(usage=outcome.usage))
                await send(StopEvent(stop_reason=outcome.stop_reason))
            return outcome

        return await serve_stream(self._engine, payload, provider=provider, answer=answer)

    async def handle_complete(self, payload: Any, provider: str) -> dict[str, Any]:
        async def answer(request: ProviderRequest, send: Send | None) -> Outcome:
            return await self.answer(request, StreamSink(send), provider)

        return await serve_complete(payload, provider=provider, answer=answer)

    async def handle_profile(self, payload: Any, provider: str) -> dict[str, Any]:
        return ProviderProfile(
            provider=provider, tool_calling=self.profile.tool_calling
        ).model_dump(mode="json")

    async def handle_check(self, payload: Any, provider: str) -> dict[str, Any]:
        keys = await self._keys.resolve()
        problem: str | None = None
        if self.profile.requires_key and not keys.present:
            problem = self._keys.missing_hint()
        elif not self.profile.requires_key:
            problem = await self._probe()
        return CheckResult(
            provider=provider,
            ready=problem is None,
            problem=problem,
            key_source=keys.source,
            keys=len(keys.values),
            base_url=self.profile.base_url,
        ).model_dump(mode="json")

    async def _probe(self, timeout: float = 1.0) -> str | None:
        """Can a TCP connection to the base URL's host be opened? ``None``: yes."""
        parts = urlsplit(self.profile.base_url)
        host = parts.hostname or "localhost"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, TimeoutError) as exc:
            reason = type(exc).__name__ if isinstance(exc, TimeoutError) else str(exc)
            return self._unreachable(reason)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return None

    def _unreachable(self, reason: str) -> str:
        hint = f"; {self.profile.hint}" if self.profile.hint else ""
        return (
            f"cannot reach the {self.name} server at {self.profile.base_url} ({reason}){hint}"
            f" — or point worker_config.{self.worker}.profiles.{self.name}.base_url at it"
        )

    # -- one call, retried -------------------------------------------------------------------
    async def answer(
        self, request: ProviderRequest, sink: StreamSink, provider: str
    ) -> AssistantMessage | ProviderFailure:
        """Ask the model (retrying, then the fallback model): the message or the failure, in
        one GenAI span (:mod:`tackroom.kit.genai`)."""
        with model_call_span(
            provider=provider,
            model=request.model,
            max_tokens=request.max_output_tokens,
            temperature=request.temperature,
            request=request,
        ) as span:
            outcome = await self._answer(request, sink, provider, span)
            if isinstance(outcome, ProviderFailure):
                span.failed(outcome.kind, outcome.message, status=outcome.status)
            else:
                span.answered(
                    model=outcome.model,
                    stop_reason=outcome.stop_reason,
                    usage=outcome.usage,
                    message=outcome,
                )
            return outcome

    async def _answer(
        self, request: ProviderRequest, sink: StreamSink, provider: str, span: ModelCallSpan
    ) -> AssistantMessage | ProviderFailure:
        if not request.model:
            return ProviderFailure("permanent", f"name a model: {provider}:MODEL")
        clock, started = self._runtime.clock, self._runtime.clock()
        models = [request.model]
        fallback = self.profile.fallback_model
        if fallback and fallback != request.model:
            models.append(fallback)
        failure = ProviderFailure("transient", "no attempt was made")
        for position, model in enumerate(models):
            if position > 0:
                span.falling_back(model)
            info = await self._catalog.model(model)
            retry = 0
            while True:
                outcome = await self._attempt(request, model, info, sink, provider)
                if isinstance(outcome, AssistantMessage):
                    return outcome
                failure = outcome
                if sink.emitted or position > 0:
                    return failure
                retry += 1
                delay = retry_delay(
                    self._retry,
                    failure,
                    retry=retry,
                    elapsed=clock() - started,
                    draw=self._runtime.random,
                )
                if delay is None:
                    break
                _log.warning("provider %s, model %s: %s: %s; retry %d in %.2fs", provider,
                             model, failure.kind, failure.message, retry, delay)  # fmt: skip
                span.retrying(failure.kind, failure.message, delay=delay)
                await self._runtime.sleep(delay)
            if not failure.retryable:
                break
            if position + 1 < len(models):
                _log.warning("provider %s: %s failed (%s); trying the fallback model %s",
                             provider, model, failure.kind, models[position + 1])  # fmt: skip
        return failure

    def _estimate(self, request: ProviderRequest) -> int:
        if not self._count_tokens:
            return 0
        size = len(request.system_prompt) + len(
            json.dumps([m.model_dump(mode="json") for m in request.messages])
        )
        size += sum(len(json.dumps(t.parameters)) + len(t.description) for t in request.tools)
        return estimate_tokens(size)

    async def _attempt(
        self,
        request: ProviderRequest,
        model: str,
        info: ModelInfo,
        sink: StreamSink,
        provider: str,
    ) -> AssistantMessage | ProviderFailure:
        keys = await self._keys.resolve()
        key = self._keys.pick(keys)
        if key is None:
            if self.profile.requires_key:
                return ProviderFailure("auth", self._keys.missing_hint())
            key = self.profile.placeholder_key
        estimate = self._estimate(request)
        await self._limiter.acquire(estimate)
        sink.reset()
        try:
            await self._adapter.run(WireCall(request, model, key, info), sink)
            message = sink.finish(provider=provider, model=model, prices=info.prices)
        except ChannelClosed:
            raise
        except Exception as exc:
            failure = classify_exception(exc).redacted(self._keys.secrets | {key})
            if failure.kind == "auth":
                self._keys.invalidate()
            if failure.connection and not sink.opened:  # name the URL, keyed or not
                failure = failure.saying(self._unreachable(failure.message))
            elif failure.connection and sink.opened and "mid-stream" not in failure.message:
                # SDKs differ in what they raise when the body breaks off (anthropic >= 2.17
                # wraps the transport error in APIConnectionError): say where it broke.
                failure = failure.saying(f"the connection broke mid-stream ({failure.message})")
            return failure
        self._limiter.settle(estimate, sink.total_tokens)
        return message

    async def aclose(self) -> None:
        await self._adapter.aclose()
