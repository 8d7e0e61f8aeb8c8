"""Serving a cassette on the bus: the provider the run called and every tool it offered.

Replacing a layer means running a worker that registers the same ids: :class:`CassetteProvider`
serves ``provider::<name>::stream`` (and ``::complete``) under the recorded provider's name and
answers each model call with the next recorded answer — its deltas as they were streamed, then
the recorded message whole (timestamp and usage included) — after checking the request against
the recorded one; :func:`cassette_tools_worker` serves each offered function id and answers each
call with what the recorded call got, running nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tackroom.contracts.cassette import Cassette, CassetteTool, Divergence, ToolExchange
from tackroom.contracts.messages import AgentMessage, AssistantMessage
from tackroom.contracts.provider import (
    FunctionCallDelta,
    ProviderRequest,
    TextDelta,
    ThinkingDelta,
)
from tackroom.contracts.sessions import INBOX_PUSH, InboxPushRequest
from tackroom.contracts.tools import CALL_CONTEXT_KEY
from tackroom.engine.protocol import Engine
from tackroom.harness.replay_diff import request_divergence
from tackroom.kit.providers.errors import ProviderFailure
from tackroom.kit.providers.streaming import Outcome, Send, register_provider
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = ["REPLAY_DROPS_TRAITS", "CassetteProvider", "ToolAnswers", "cassette_tools_worker"]

REPLAY_DROPS_TRAITS = ("requires_approval", "required_permission")
"""Traits a replay registers the tools without: every recorded call's outcome is decided
already (run, denied, approved), and the cassette hands it back; nobody is asked again."""


class _NoConfig(WorkerConfig):
    pass


class CassetteProvider:
    """The recorded provider: ``name`` and ``model`` as the run used them (a provider object the
    harness boots through :meth:`worker_spec`)."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self.name = cassette.provider
        self.model = cassette.model
        self.calls = 0
        self.divergence: Divergence | None = None
        self._transcript = cassette.transcript()
        self._tools = [tool.spec() for tool in cassette.tools]
        self._verified = 0
        self._steered = _steered(cassette)

    def check(self, request: ProviderRequest) -> Divergence | None:
        """How the next request differs from the recorded one (``None``: it does not)."""
        cassette, turn = self.cassette, self.calls
        if turn > len(cassette.exchanges):
            return Divergence(
                where="request",
                turn=turn,
                field="(model call)",
                recorded=f"no model call {turn}: the run asked the model {turn - 1} time(s)",
                replayed=f"model call {turn}",
            )
        exchange = cassette.exchanges[turn - 1]
        found = request_divergence(
            turn=turn,
            request=request,
            model=cassette.model,
            system_prompt=cassette.system_prompt,
            tools=self._tools,
            messages=self._transcript[: exchange.context],
            verified=self._verified,
        )
        if found is None:
            self._verified = exchange.context
        return found

    async def _answer(
        self, engine: Engine, request: ProviderRequest, send: Send | None
    ) -> AssistantMessage | ProviderFailure:
        """The next recorded answer (its deltas sent as they were streamed), or a failure
        naming the divergence."""
        self.calls += 1
        found = self.check(request)
        if found is not None:
            if self.divergence is None:
                self.divergence = found
            text = "replay diverged from the recording: " + found.describe()
            return ProviderFailure("permanent", text)
        exchange = self.cassette.exchanges[self.calls - 1]
        if send is not None:
            await self._steer(engine, self.calls)
            for chunk in exchange.chunks:
                if chunk.kind == "text":
                    await send(TextDelta(delta=chunk.delta))
                elif chunk.kind == "thinking":
                    await send(ThinkingDelta(delta=chunk.delta))
                else:
                    await send(FunctionCallDelta(index=0, arguments_delta=chunk.delta))
        return exchange.response

    async def _steer(self, engine: Engine, turn: int) -> None:
        """What reached the run's inbox during model call ``turn``, in the inbox again: the
        steering check after it takes the same messages."""
        for message in self._steered.get(turn, []):
            request = InboxPushRequest(
                session_id=self.cassette.session_id, name="steering", item=message
            )
            await INBOX_PUSH.send(engine, request)

    def worker_spec(self) -> WorkerSpec[Any]:
        provider, model = self.name, self.model

        async def start(ctx: WorkerContext[_NoConfig]) -> None:
            async def answer(request: ProviderRequest, send: Send | None) -> Outcome:
                return await self._answer(ctx.engine, request, send)

            await register_provider(
                ctx,
                provider=provider,
                model=model,
                answer=answer,
                descriptions=(
                    f"The recorded answers of {provider!r}, streamed again.",
                    f"The recorded answers of {provider!r}, whole.",
                ),
                hop=False,
            )

        return WorkerSpec(
            name=f"cassette-{provider}",
            description=f"Model {model!r} of {provider!r} answering from a cassette.",
            config_model=_NoConfig,
            start=start,
        )


def _steered(cassette: Cassette) -> dict[int, list[AgentMessage]]:
    """:meth:`Cassette.steered` for every turn, in one pass over the run's entries."""
    prefix = f"{cassette.run_id}-t"
    taken: dict[int, list[AgentMessage]] = {}
    for entry in cassette.messages:
        turn, marker, index = entry.entry_id.removeprefix(prefix).partition("-in")
        if entry.entry_id.startswith(prefix) and marker and turn.isdigit() and index.isdigit():
            taken.setdefault(int(turn), []).append(entry.message)
    return taken


@dataclass(slots=True)
class ToolAnswers:
    """Which recorded call answers a replayed one: the same call id (a model answering from the
    cassette), else the first unused call of the same function with the same arguments (a live
    model names its calls anew)."""

    cassette: Cassette
    used: set[str] = field(default_factory=set)
    answered: int = 0
    missed: list[str] = field(default_factory=list)

    def answer(self, function_id: str, call_id: str | None, arguments: dict[str, Any]) -> Any:
        recorded = self._find(function_id, call_id, arguments)
        self.answered += 1
        if recorded is None:
            what = f"{function_id}({json.dumps(arguments, sort_keys=True, ensure_ascii=False)})"
            self.missed.append(what)
            text = (
                f"replay: the recorded run made no call {what}; its tools answer only the calls"
                " it made, so this one got no result"
            )
            return {"content": [{"type": "text", "text": text}], "is_error": True}
        self.used.add(recorded.call_id)
        return recorded.result.model_dump(mode="json")

    def _find(
        self, function_id: str, call_id: str | None, arguments: dict[str, Any]
    ) -> ToolExchange | None:
        if call_id is not None:
            same = self.cassette.call(call_id)
            if same is not None and same.function_id == function_id and call_id not in self.used:
                return same
        return next(
            (
                call
                for call in self.cassette.tool_calls
                if call.call_id not in self.used
                and call.function_id == function_id
                and call.arguments == arguments
            ),
            None,
        )


def cassette_tools_worker(
    answers: ToolAnswers, *, tools: Sequence[CassetteTool] | None = None
) -> WorkerSpec[Any]:
    """Every tool the run offered (or ``tools``: the same functions as described today), under
    its function id and schema, answered from the cassette (nothing runs: a write is not
    written, a command is not run)."""

    async def start(ctx: WorkerContext[_NoConfig]) -> None:
        for tool in answers.cassette.tools if tools is None else tools:
            await ctx.register_function(
                tool.function_id,
                _handler(answers, tool.function_id),
                description=tool.description,
                request_schema=tool.request_schema(drop=REPLAY_DROPS_TRAITS),
            )

    return WorkerSpec(
        name="cassette-tools",
        description="The run's tools, answering what the recorded calls got.",
        config_model=_NoConfig,
        start=start,
    )


def _handler(answers: ToolAnswers, function_id: str) -> Any:
    async def handle(payload: Any) -> Any:
        arguments = dict(payload) if isinstance(payload, dict) else {}
        context = arguments.pop(CALL_CONTEXT_KEY, None)
        call_id = context.get("function_call_id") if isinstance(context, dict) else None
        return answers.answer(function_id, call_id, arguments)

    return handle
