"""One model call of a turn: hooks, the model chain (failover) and tools written in text.

``before_model_call`` hooks see (and may block or rewrite) the request first. Then the run's
models are tried in order — its model, then its ``fallbacks`` — moving on only when a call
failed with a ``transient`` or ``rate_limited`` error (after the provider's own retries) **and
none of its deltas were shown**: a switch never takes back text a reader saw. Each switch is a
``model_switch`` event and an event on the step's span. A provider whose profile says
``tool_calling: text`` gets its tools in the system prompt; an answer whose ``tool_call`` block
cannot be read is answered with a correction, at most ``text_corrections`` times, each try
streaming under a new ``stream_id``. Last, ``after_model_call`` hooks see (and may redact or
block) the answer before it is stored; while any listens, deltas are held back (nothing goes
out live, no snapshot is offered), so what a redactor removes is never streamed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from opentelemetry import trace

from tackroom.contracts.events import ModelSwitchData, attempt_key
from tackroom.contracts.hooks import AFTER_MODEL_CALL
from tackroom.contracts.messages import AgentMessage, AssistantMessage, Usage
from tackroom.contracts.provider import (
    ProviderProfileRequest,
    ProviderRequest,
    ToolCalling,
    profile_function,
)
from tackroom.engine.errors import EngineError, FunctionNotFound, unavailable_cause
from tackroom.engine.protocol import Engine
from tackroom.kit import texttools
from tackroom.kit.hooks.modelcalls import CallIds, HookBlocked, ModelCallHooks
from tackroom.kit.live import NO_LIVE, LiveSink
from tackroom.workers.orchestrator.dispatch import Emit
from tackroom.workers.orchestrator.models import ModelInfoCache
from tackroom.workers.orchestrator.record import TurnRecord
from tackroom.workers.orchestrator.sentprompt import Sent
from tackroom.workers.orchestrator.streaming import (
    ModelCaller,
    Streamed,
    base_request,
    error_message,
)
from tackroom.workers.orchestrator.structured import OutputSpec, native_format, prompted

__all__ = ["SWITCH_ON", "HookBlocked", "ModelCall", "ProfileCache"]

SWITCH_ON = frozenset({"transient", "rate_limited"})
"""Error kinds that move a call to the next model; ``auth``, ``context_overflow`` and
``permanent`` (a bad request) would fail the same way anywhere, or need a person."""

_PROFILE_TTL = 30.0

AbortCheck = Callable[[], Awaitable[bool]]


class ProfileCache:
    """Each provider's ``tool_calling``, asked once (``provider::<name>::profile``)."""

    def __init__(self, engine: Engine, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._engine = engine
        self._clock = clock
        self._known: dict[str, ToolCalling] = {}
        self._assumed: dict[str, float] = {}

    async def tool_calling(self, provider: str) -> ToolCalling:
        known = self._known.get(provider)
        if known is not None:
            return known
        assumed = self._assumed.get(provider)
        if assumed is not None and self._clock() - assumed < _PROFILE_TTL:
            return "native"
        try:
            reply = await profile_function(provider).call(
                self._engine, ProviderProfileRequest(), timeout=5.0
            )
        except FunctionNotFound:
            # A provider worker without profiles (scripted, a model object): native. Asked
            # again later, since its worker may not be up yet.
            self._assumed[provider] = self._clock()
            return "native"
        except EngineError as exc:
            if unavailable_cause(exc) is not None:
                raise
            self._assumed[provider] = self._clock()
            return "native"
        self._known[provider] = reply.tool_calling
        return reply.tool_calling


@dataclass(frozen=True, slots=True)
class _Try:
    streamed: Streamed
    shown: bool


class ModelCall:
    def __init__(
        self,
        caller: ModelCaller,
        *,
        hooks: ModelCallHooks,
        profiles: ProfileCache,
        models: ModelInfoCache | None = None,
        text_corrections: int = 2,
    ) -> None:
        self._caller = caller
        self._hooks = hooks
        self._profiles = profiles
        self._models = models
        self._corrections = text_corrections

    async def call(
        self,
        record: TurnRecord,
        messages: list[AgentMessage],
        emit: Emit,
        *,
        attempt: int = 1,
        abort_requested: AbortCheck | None = None,
        sent: Sent | None = None,
    ) -> AssistantMessage | HookBlocked:
        """The answer; ``sent`` (when given) is told what the answering try was sent."""
        turn = record.turn_count + 1
        ids = CallIds(record.session_id, record.run_id, turn, record.provider, record.model)
        base = base_request(record, messages)
        request = await self._hooks.before(ids, base)
        if isinstance(request, HookBlocked):
            return request
        sent = Sent() if sent is None else sent
        sent.run_tools = record.tools if request is base else None
        hold_back = self._hooks.listening(AFTER_MODEL_CALL)
        live = NO_LIVE if hold_back else self._caller.live(record)
        chain = [(record.provider, record.model)]
        chain.extend((ref.provider, ref.model) for ref in record.fallbacks)
        message_id = record.entry_id(f"t{turn}-a")
        for position, (provider, model) in enumerate(chain):
            tried = await self._one_model(
                provider,
                model,
                request,
                live,
                message_id=message_id,
                abort_requested=abort_requested,
                output=record.output,
                sent=sent,
            )
            message = tried.streamed.message
            following = chain[position + 1] if position + 1 < len(chain) else None
            if following is None or not _switches(message, shown=tried.shown and not hold_back):
                break
            data = ModelSwitchData(
                from_provider=provider,
                from_model=model,
                to_provider=following[0],
                to_model=following[1],
                error_kind=message.error_kind or "transient",
                reason=message.error_message or "",
                position=position + 1,
            )
            await emit(attempt_key(f"t{turn}:switch{position + 1}", attempt), data)
            _on_span(data)
        if message.stop_reason == "aborted" or not self._hooks.listening(AFTER_MODEL_CALL):
            return message
        return await self._hooks.after(
            CallIds(
                record.session_id,
                record.run_id,
                turn,
                message.provider,
                message.model,
                principal=record.principal,
            ),
            message,
        )

    async def _one_model(
        self,
        provider: str,
        model: str,
        request: ProviderRequest,
        live: LiveSink,
        *,
        message_id: str,
        abort_requested: AbortCheck | None,
        sent: Sent,
        output: OutputSpec | None = None,
    ) -> _Try:
        if model != request.model:
            request = request.model_copy(update={"model": model})
        if output is not None:
            request = await self._asking_for(provider, model, request, output)
        if await self._profiles.tool_calling(provider) == "native":
            sent.sending(request, system_prompt=request.system_prompt)
            streamed = await self._caller.stream(
                provider, request, live, message_id=message_id, abort_requested=abort_requested
            )
            return _Try(streamed, streamed.shown)
        return await self._in_text(
            provider,
            request,
            live,
            message_id=message_id,
            abort_requested=abort_requested,
            sent=sent,
        )

    async def _asking_for(
        self, provider: str, model: str, request: ProviderRequest, output: OutputSpec
    ) -> ProviderRequest:
        """The provider's native JSON-schema mode where the catalog says the model has it, else
        the schema in the system prompt (each model of the chain on its own)."""
        info = None if self._models is None else await self._models.get(provider, model)
        if info is not None and info.capabilities.structured_output:
            return request.model_copy(update={"output_format": native_format(output)})
        return request.model_copy(update={"system_prompt": prompted(output, request.system_prompt)})

    async def _in_text(
        self,
        provider: str,
        request: ProviderRequest,
        live: LiveSink,
        *,
        message_id: str,
        abort_requested: AbortCheck | None,
        sent: Sent,
    ) -> _Try:
        """Tools in the prompt, calls read from the answer, a correction when one is unreadable."""
        names = [tool.name for tool in request.tools]
        prompt = request.system_prompt
        if request.tools:
            section = texttools.tools_prompt(request.tools)
            prompt = f"{prompt}\n\n{section}" if prompt else section
        history = texttools.as_text_history(request.messages)
        text_request = request.model_copy(
            update={"system_prompt": prompt, "tools": [], "messages": history}
        )
        shown, usage = False, Usage()
        for correction in range(self._corrections + 1):
            sent.sending(
                request,
                system_prompt=prompt,
                tool_calling="text",
                appended=text_request.messages[len(history) :],
            )
            streamed = await self._caller.stream(
                provider,
                text_request,
                live,
                message_id=message_id,
                abort_requested=abort_requested,
            )
            shown = shown or streamed.shown
            usage = usage + streamed.message.usage
            message = streamed.message.model_copy(update={"usage": usage})
            if message.stop_reason in ("error", "aborted") or not names:
                return _Try(Streamed(message, streamed.shown, streamed.stream_id), shown)
            parsed = texttools.parse_calls(message, names)
            if not isinstance(parsed, texttools.CallProblem):
                return _Try(Streamed(parsed, streamed.shown, streamed.stream_id), shown)
            if correction == self._corrections:
                failed = error_message(
                    "permanent",
                    f"the model's tool call could not be read after {self._corrections}"
                    f" corrections: {parsed.reason}",
                )
                failed.usage, failed.provider, failed.model = usage, message.provider, message.model
                return _Try(Streamed(failed, streamed.shown, streamed.stream_id), shown)
            text_request = text_request.model_copy(
                update={
                    "messages": [
                        *text_request.messages,
                        message,
                        texttools.correction(parsed),
                    ]
                }
            )
        raise AssertionError("unreachable")


def _switches(message: AssistantMessage, *, shown: bool) -> bool:
    return message.stop_reason == "error" and message.error_kind in SWITCH_ON and not shown


def _on_span(data: ModelSwitchData) -> None:
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.add_event(
        "tackroom.model_switch",
        {
            "tackroom.model_switch.from": f"{data.from_provider}:{data.from_model}",
            "tackroom.model_switch.to": f"{data.to_provider}:{data.to_model}",
            "error.type": data.error_kind,
        },
    )
    span.set_attribute("tackroom.model_switches", data.position)
    span.set_attribute("tackroom.model", f"{data.to_provider}:{data.to_model}")
