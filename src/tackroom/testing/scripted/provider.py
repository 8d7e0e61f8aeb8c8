"""The scripted provider: replays a :class:`Script` through the provider stream protocol.

It serves ``provider::<name>::stream`` and ``provider::<name>::complete`` exactly as a real
provider does (see :mod:`tackroom.contracts.provider`), answering each call with the next turn of
its script, and ``provider::<name>::status`` (calls, violations, remaining turns) for tests that
reach it over the bus. It is strict: a call after the script is exhausted, a request that fails a
turn's ``expect``, or a malformed request is answered with an ``error`` frame (kind
``permanent``) and recorded as a :class:`Violation`; :meth:`ScriptedProvider.assert_consumed`
raises if any happened or if turns remain.

Cursors: by default all calls share one sequence; with ``per_session=True`` each
``session_id`` replays its own fresh copy of the default turns (100 concurrent sessions can run the
same script); turns marked ``session: ID`` form that session's own sequence in either mode. With
``cursor="transcript"`` the turn answering a call is picked from the request (turn ``i`` answers a
request holding ``i`` assistant messages) instead of from a count of calls, so a call repeated
after a crash, or made to a restarted provider, gets the answer its transcript calls for. With
``cursor_state="engine"`` (the ``scripted`` worker's default) the count of calls lives in engine
state, so replicas of the provider in any number of processes answer as one, and a call repeated
after its process was killed gets the turn it got before (see :mod:`.tally`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from tackroom.contracts.messages import AssistantMessage, Usage
from tackroom.contracts.provider import (
    SCHEMA_VERSION,
    ProviderRequest,
    complete_function,
    request_field,
    stream_function,
)
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import Engine, Registration
from tackroom.kit.genai import ModelCallSpan, model_call_span
from tackroom.kit.providers.errors import ProviderFailure
from tackroom.kit.providers.streaming import (
    Outcome,
    Send,
    model_of,
    parse_request,
    serve_complete,
    serve_stream,
)
from tackroom.runtime.typed import ByReference
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.testing.scripted.cursors import CursorMode, Cursors, CursorState, Miss, NoSession
from tackroom.testing.scripted.expect import mismatches
from tackroom.testing.scripted.frames import CompiledTurn, compile_turn, finished_message
from tackroom.testing.scripted.script import Script, ScriptTurn
from tackroom.testing.scripted.tally import EngineCounter, request_digest, script_digest

__all__ = ["ScriptAssertionError", "ScriptedProvider", "Violation", "status_function"]

Sleep = Callable[[float], Awaitable[None]]


def status_function(provider: str) -> str:
    return f"provider::{provider}::status"


class ScriptAssertionError(AssertionError):
    """The script was not replayed exactly: violations happened or turns remain."""


@dataclass(frozen=True, slots=True)
class Violation:
    """A call the script did not allow. ``call`` counts every call the provider got (1-based);
    ``step`` is the turn it reached in its sequence (``None``: none)."""

    call: int
    session_id: str | None
    step: int | None
    message: str


class _NoConfig(WorkerConfig):
    """A provider built in Python takes no config section."""


class _Status(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    calls: int
    consumed: bool
    violations: list[dict[str, Any]]
    remaining: list[dict[str, Any]]


class ScriptedProvider:
    """A provider that answers from ``script``; register it on an engine or boot its worker.

    ``script`` is a :class:`Script` or an iterable of turns. ``name`` is the provider name in the
    function ids and in the messages' ``provider`` field. ``cursor`` is ``"calls"`` (each call
    takes the next turn) or ``"transcript"`` (the request's count of assistant messages picks the
    turn; see :mod:`~tackroom.testing.scripted.cursors`). ``cursor_state`` is where the
    ``calls`` count lives: ``"process"`` (this object: one replica) or ``"engine"`` (engine state:
    every replica of ``name`` on the bus shares it, one state round trip per model call).
    ``sleep`` replaces ``asyncio.sleep`` for turn delays (a fake clock in tests).
    """

    def __init__(
        self,
        script: Script | Iterable[ScriptTurn | Mapping[str, Any]],
        *,
        per_session: bool = False,
        cursor: CursorMode = "calls",
        cursor_state: CursorState = "process",
        name: str = "scripted",
        record_requests: bool = True,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if cursor not in ("calls", "transcript"):
            raise ValueError(f"cursor must be 'calls' or 'transcript', not {cursor!r}")
        if cursor_state not in ("process", "engine"):
            raise ValueError(f"cursor_state must be 'process' or 'engine', not {cursor_state!r}")
        self.script = script if isinstance(script, Script) else Script(script)
        self.name = name
        self.per_session = per_session
        self.cursor: CursorMode = cursor
        self.cursor_state: CursorState = cursor_state
        self.record_requests = record_requests
        self._sleep = sleep
        self._cursors = Cursors(
            self._compile(self.script.default_turns),
            {sid: self._compile(self.script.for_session(sid)) for sid in self.script.sessions},
            per_session=per_session,
            mode=cursor,
        )
        self._engine: Engine | None = None
        self._counter: EngineCounter | None = None
        self._registrations: list[Registration] = []
        self.calls = 0
        self.requests: list[ProviderRequest] = []
        self.violations: list[Violation] = []

    def _compile(self, turns: tuple[ScriptTurn, ...]) -> tuple[CompiledTurn, ...]:
        return tuple(
            compile_turn(
                turn,
                step=step,
                provider=self.name,
                deltas=self.script.deltas,
                argument_deltas=self.script.argument_deltas,
            )
            for step, turn in enumerate(turns, start=1)
        )

    # -- wiring ------------------------------------------------------------------------------
    @property
    def stream_function(self) -> str:
        return stream_function(self.name).id

    @property
    def complete_function(self) -> str:
        return complete_function(self.name).id

    async def register(self, engine: Engine, *, worker: str | None = None) -> list[Registration]:
        """Serve this provider's functions on ``engine`` (undo with :meth:`unregister`)."""
        self._use(engine)
        worker = worker or self.name
        for function_id, handler, description in self._table():
            self._registrations.append(
                await engine.register_function(
                    function_id,
                    handler,
                    description=description,
                    worker=worker,
                    hop=self._spans_itself(function_id),
                )
            )
        return list(self._registrations)

    async def unregister(self) -> None:
        while self._registrations:
            await self._registrations.pop().unregister()

    def worker_spec(self) -> WorkerSpec[Any]:
        """A :class:`WorkerSpec` that boots this provider in a ``Host`` (no config section)."""

        async def start(ctx: WorkerContext[_NoConfig]) -> None:
            await self.start_in(ctx)

        return WorkerSpec(
            name=self.name,
            description=f"Scripted provider {self.name!r} built in Python.",
            config_model=_NoConfig,
            start=start,
        )

    async def start_in(self, ctx: WorkerContext[Any]) -> None:
        """Register through a worker context (the host unregisters at shutdown)."""
        self._use(ctx.engine)
        for function_id, handler, description in self._table():
            await ctx.register_function(
                function_id, handler, description=description, hop=self._spans_itself(function_id)
            )

    def _spans_itself(self, function_id: str) -> bool:
        """A model call's GenAI span stands for its invocation (a hop in traces)."""
        return function_id in (self.stream_function, self.complete_function)

    def _use(self, engine: Engine) -> None:
        self._engine = engine
        if self.cursor_state == "engine" and self.cursor == "calls":
            digest = script_digest(self.script, per_session=self.per_session)
            self._counter = EngineCounter(engine, provider=self.name, digest=digest)
        self._cursors.count_with(self._counter)

    def _table(self) -> list[tuple[str, Callable[[Any], Awaitable[Any]], str]]:
        return [
            (self.stream_function, ByReference(self.handle_stream),
             "Replay the next scripted turn as provider stream frames on the request's writer."),
            (self.complete_function, ByReference(self.handle_complete),
             "Answer with the next scripted turn as a finished AssistantMessage."),
            (status_function(self.name), self.handle_status,
             "Calls served, strictness violations and turns remaining."),
        ]  # fmt: skip

    # -- strictness --------------------------------------------------------------------------
    def remaining(self) -> dict[str | None, int]:
        """Turns not yet replayed by this provider, per cursor key (``None``: the shared
        sequence); with replicas, ``provider::<name>::status`` counts theirs too."""
        return self._cursors.remaining()

    def problems(self, remaining: dict[str | None, int] | None = None) -> list[str]:
        """Why :meth:`assert_consumed` would fail (empty: it passes)."""
        found = [
            f"call {v.call}{f' (session {v.session_id})' if v.session_id else ''}: {v.message}"
            for v in self.violations
        ]
        for key, count in (self.remaining() if remaining is None else remaining).items():
            if key is not None:
                found.append(f"{count} turn(s) not replayed for session {key}")
            elif self._cursors.default_used:
                found.append(f"{count} turn(s) not replayed")
            else:
                found.append(f"{count} turn(s) not replayed: no call reached the script")
        return found

    def assert_consumed(self) -> None:
        """Raise :class:`ScriptAssertionError` if a violation happened or turns remain."""
        found = self.problems()
        if found:
            raise ScriptAssertionError(f"scripted provider {self.name!r}: " + "; ".join(found))

    @property
    def sessions_started(self) -> list[str]:
        """Session ids that got a cursor of their own (per-session or keyed)."""
        return self._cursors.sessions_started

    def _violate(self, call: int, session_id: str | None, step: int | None, message: str) -> str:
        self.violations.append(Violation(call, session_id, step, message))
        return f"scripted provider {self.name!r}: {message}"

    async def _take(self, request: ProviderRequest, call: int) -> CompiledTurn | str:
        """The turn answering ``request``, or the error message of a violation."""
        session_id = request.session_id
        assistant_turns = sum(isinstance(m, AssistantMessage) for m in request.messages)
        asked = request_digest(request) if self._counter is not None else ""
        taken = await self._cursors.take(session_id, assistant_turns=assistant_turns, request=asked)
        if isinstance(taken, Miss):
            who = None if isinstance(taken, NoSession) else session_id
            return self._violate(call, who, None, taken.describe(call=call, provider=self.name))
        expect = taken.turn.expect
        problems = mismatches(expect, request) if expect is not None else []
        if problems:
            return self._violate(
                call,
                session_id,
                taken.step,
                f"step {taken.step}: request does not match expect: " + "; ".join(problems),
            )
        return taken

    def _parse(
        self, payload: Any, call: int, span: ModelCallSpan
    ) -> ProviderRequest | ProviderFailure:
        request = parse_request(payload)
        if isinstance(request, ProviderFailure):
            session = request_field(payload, "session_id")
            who = session if isinstance(session, str) else None
            return self._refuse(span, self._violate(call, who, None, request.message))
        if self.record_requests:
            self.requests.append(request)
        return request

    @staticmethod
    def _refuse(span: ModelCallSpan, message: str) -> ProviderFailure:
        span.failed("permanent", message)
        return ProviderFailure("permanent", message)

    # -- handlers ----------------------------------------------------------------------------
    async def _serve(self, payload: Any, *, stream: bool) -> dict[str, Any]:
        """One call of ``stream`` or ``complete``: the next turn played (or a violation)."""
        if self._engine is None:
            raise FunctionError("internal", "the scripted provider is not registered")
        self.calls += 1
        call = self.calls
        with self._span(payload) as span:

            def parse(raw: Any) -> ProviderRequest | ProviderFailure:
                return self._parse(raw, call, span)

            async def answer(request: ProviderRequest, send: Send | None) -> Outcome:
                plan = await self._take(request, call)
                if isinstance(plan, str):
                    return self._refuse(span, plan)
                _tell(span, plan, request.model)
                return await self._play(plan, request.model, send)

            if stream:
                who = f"scripted provider {self.name!r}"
                return await serve_stream(
                    self._engine, payload, provider=self.name, answer=answer, parse=parse, who=who
                )
            return await serve_complete(payload, provider=self.name, answer=answer, parse=parse)

    async def handle_stream(self, payload: Any) -> dict[str, Any]:
        return await self._serve(payload, stream=True)

    async def handle_complete(self, payload: Any) -> dict[str, Any]:
        return await self._serve(payload, stream=False)

    async def _play(self, compiled: CompiledTurn, model: str, send: Send | None) -> Outcome:
        """The turn's frames through ``send`` (none for ``complete``), its delays and stalls;
        its message, or its scripted failure when it streams."""
        turn = compiled.turn
        if turn.delay:
            await self._sleep(turn.delay)
        gap = turn.delay_between_frames if send is not None else None
        if send is not None:
            for sent, frame in enumerate(compiled.frames):
                if sent == turn.stall_after_frames:
                    await _stall()
                if gap:
                    await self._sleep(gap)
                await send(frame)
        if turn.stall_after_frames is not None:
            await _stall()
        if gap:
            await self._sleep(gap)
        failure = turn.error
        if failure is not None and send is not None:
            return ProviderFailure(failure.kind, failure.message, retry_after=failure.retry_after)
        return finished_message(compiled, model)

    def _span(self, payload: Any) -> AbstractContextManager[ModelCallSpan]:
        return model_call_span(provider=self.name, model=model_of(payload), request=payload)

    async def handle_status(self, payload: Any) -> dict[str, Any]:
        """This replica's calls and violations; turns remaining as every replica counted them."""
        reached = await self._counter.reached() if self._counter is not None else None
        remaining = self._cursors.remaining(reached)
        return _Status(
            calls=self.calls,
            consumed=not self.problems(remaining),
            violations=[
                {"call": v.call, "session_id": v.session_id, "step": v.step, "message": v.message}
                for v in self.violations
            ],
            remaining=[{"session_id": k, "turns": n} for k, n in remaining.items()],
        ).model_dump(mode="json")


def _tell(span: ModelCallSpan, compiled: CompiledTurn, model: str) -> None:
    """What the scripted turn answers, on the call's GenAI span."""
    failure = compiled.turn.error
    if failure is not None:
        span.failed(failure.kind, failure.message)
    else:
        message = compiled.message if span.summarizing else None
        usage = compiled.turn.usage or Usage()
        span.answered(
            model=model, stop_reason=compiled.message.stop_reason, usage=usage, message=message
        )


async def _stall() -> None:
    """Wait until cancelled: a model that stopped answering (see ``stall_after_frames``)."""
    await asyncio.get_running_loop().create_future()
