"""The provider contract suite: what every provider worker's stream must look like.

A provider proves it fits :mod:`tackroom.contracts.provider` by running this suite: subclass
:class:`ProviderContract` in a test module and give it a ``subject`` fixture, a
:class:`ProviderSubject` that boots the provider on an engine and makes it answer the next
call(s) with a :class:`Scenario` — the scripted provider through a script, a real provider
through a fake server replaying the scenario in its wire format::

    class TestOpenAIProvider(ProviderContract):
        @pytest.fixture
        def subject(self) -> ProviderSubject:
            return OpenAISubject()   # serving() points the worker at a fake SSE server

Scenarios needing a feature the provider lacks (``subject.features``) are skipped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest

from tackroom.contracts.messages import (
    AssistantMessage,
    ErrorKind,
    FunctionCallBlock,
    ThinkingBlock,
    Usage,
    UserMessage,
    text_of,
)
from tackroom.contracts.provider import (
    DoneEvent,
    ProviderRequest,
    ToolSpec,
    complete_function,
    provider_event_adapter,
)
from tackroom.engine import Engine
from tackroom.testing import CollectedStream, collect_stream, running_engine
from tackroom.testing.contracts.base import OnEveryBackend

__all__ = [
    "FEATURES",
    "SCENARIOS",
    "ProviderContract",
    "ProviderSubject",
    "Scenario",
    "ScenarioCall",
    "check_protocol",
    "contract_request",
]

FEATURES = frozenset({"thinking", "usage", "retry_after", "parallel_tool_calls"})
"""Optional behaviours a scenario may need: ``thinking`` (thinking deltas and blocks),
``usage`` (exact token counts), ``retry_after`` (an error carrying it), ``parallel_tool_calls``."""


@dataclass(frozen=True, slots=True)
class ScenarioCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One answer the provider under test must produce for the next call."""

    name: str
    text: str = ""
    thinking: str = ""
    tool_calls: tuple[ScenarioCall, ...] = ()
    usage: Usage | None = None
    error_kind: ErrorKind | None = None
    error_message: str = ""
    retry_after: float | None = None
    needs: frozenset[str] = field(default_factory=frozenset)

    @property
    def stop_reason(self) -> str:
        if self.error_kind is not None:
            return "error"
        return "function_call" if self.tool_calls else "end"


_READ = ScenarioCall("fs__read", {"path": "notes/today.md", "limit": 3, "tags": ["a", "ü"]})
_ADD = ScenarioCall("calc__add", {"a": 1.5, "b": -2})

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            name="text",
            text='Hello! This answer spans several deltas, with ünïcode — and "quotes".\n',
        ),
        Scenario(name="tool_call", tool_calls=(_READ,)),
        Scenario(name="text_then_tool_call", text="Let me look.", tool_calls=(_ADD,)),
        Scenario(
            name="parallel_tool_calls",
            tool_calls=(_READ, _ADD),
            needs=frozenset({"parallel_tool_calls"}),
        ),
        Scenario(
            name="usage",
            text="Counted.",
            usage=Usage(input_tokens=21, output_tokens=13, cache_read_tokens=5),
            needs=frozenset({"usage"}),
        ),
        Scenario(
            name="thinking",
            thinking="The user greets me; I should greet back.",
            text="Hi!",
            needs=frozenset({"thinking"}),
        ),
        Scenario(name="error_auth", error_kind="auth", error_message="invalid api key"),
        Scenario(
            name="error_rate_limited",
            error_kind="rate_limited",
            error_message="slow down",
            retry_after=2.0,
            needs=frozenset({"retry_after"}),
        ),
    ]
}


class ProviderSubject(Protocol):
    """The provider under test and how to make it answer."""

    @property
    def name(self) -> str:
        """The provider name: it serves ``provider::<name>::stream`` and ``::complete``."""
        ...

    @property
    def features(self) -> frozenset[str]: ...

    def serving(
        self, engine: Engine, scenario: Scenario, *, calls: int = 1
    ) -> AbstractAsyncContextManager[None]:
        """Boot the provider on ``engine`` so its next ``calls`` calls answer ``scenario``;
        undo everything on exit (and fail if the calls did not arrive)."""
        ...


def contract_request(*, session_id: str = "contract-session") -> ProviderRequest:
    return ProviderRequest(
        model="contract-model",
        system_prompt="You are a contract test.",
        messages=[UserMessage.text("Please answer the contract scenario.")],
        tools=[
            ToolSpec(
                name="fs__read",
                description="Read a file.",
                parameters={"type": "object", "properties": {"path": {"type": "string"}}},
            ),
            ToolSpec(name="calc__add", description="Add two numbers."),
        ],
        session_id=session_id,
    )


def check_protocol(stream: CollectedStream, *, provider: str, model: str) -> None:
    """The invariants every stream keeps, whatever it answers."""
    assert stream.result == {"schema_version": 1, "ok": True}, stream.result
    assert stream.closed, f"channel not closed normally (aborted: {stream.aborted})"
    events = [provider_event_adapter.validate_python(frame) for frame in stream.frames]
    types = stream.types
    assert types, "no frame"
    assert types[0] == "start", types
    assert stream.frames[0]["model"] == model
    assert sum(t in {"done", "error"} for t in types) == 1, types
    assert types[-1] in {"done", "error"}, types
    assert types.count("start") == 1, types
    assert types.count("stop") <= 1, types
    seen: set[int] = set()
    for frame in stream.frames:
        if frame["type"] != "function_call_delta":
            continue
        index = frame["index"]
        if index not in seen:
            assert frame.get("id"), f"call {index} starts without an id"
            assert frame.get("name"), f"call {index} starts without a name"
            assert index == len(seen), f"call indexes must count from 0: {index}"
            seen.add(index)
    message = stream.message
    if message is None:
        return
    assert isinstance(events[-1], DoneEvent)
    assert (message.provider, message.model) == (provider, model)
    if "stop" in types:
        stop = stream.frames[types.index("stop")]
        assert stop["stop_reason"] == message.stop_reason
    usages = [frame for frame in stream.frames if frame["type"] == "usage"]
    if usages:
        assert Usage.model_validate(usages[-1]["usage"]) == message.usage
    assert stream.text == text_of(message.content)
    thinking = "".join(b.text for b in message.content if isinstance(b, ThinkingBlock))
    assert stream.thinking == thinking
    assert [
        {"id": block.id, "name": block.tool_name, "arguments": block.arguments}
        for block in message.function_calls()
    ] == [
        {"id": call["id"], "name": call["name"], "arguments": call["arguments"]}
        for call in stream.tool_calls()
    ]


def _check_answer(message: AssistantMessage, scenario: Scenario) -> None:
    assert message.stop_reason == scenario.stop_reason
    assert text_of(message.content) == scenario.text
    thinking = "".join(b.text for b in message.content if isinstance(b, ThinkingBlock))
    assert thinking == scenario.thinking
    calls = message.function_calls()
    assert [(c.tool_name, c.arguments) for c in calls] == [
        (call.name, call.arguments) for call in scenario.tool_calls
    ]
    assert all(isinstance(c, FunctionCallBlock) and c.id for c in calls)
    assert len({c.id for c in calls}) == len(calls), "call ids must be unique"
    if scenario.usage is not None:
        assert message.usage == scenario.usage


def _ids(scenarios: dict[str, Scenario]) -> list[Any]:
    return [pytest.param(s, id=name) for name, s in scenarios.items()]


_ANSWERS = {k: s for k, s in SCENARIOS.items() if s.error_kind is None}
_ERRORS = {k: s for k, s in SCENARIOS.items() if s.error_kind is not None}


class ProviderContract(OnEveryBackend):
    """The suite; a subclass provides the ``subject`` fixture."""

    @pytest.fixture
    async def engine(self, engine_url: str) -> AsyncIterator[Engine]:
        async with running_engine(engine_url) as started:
            yield started

    @staticmethod
    def _require(subject: ProviderSubject, scenario: Scenario) -> None:
        missing = scenario.needs - subject.features
        if missing:
            pytest.skip(f"{subject.name} lacks {sorted(missing)}")

    async def _stream(
        self, engine: Engine, subject: ProviderSubject, scenario: Scenario
    ) -> CollectedStream:
        self._require(subject, scenario)
        async with subject.serving(engine, scenario):
            return await collect_stream(engine, subject.name, contract_request())

    @pytest.mark.parametrize("scenario", _ids(SCENARIOS))
    async def test_stream_keeps_the_protocol(
        self, engine: Engine, subject: ProviderSubject, scenario: Scenario
    ) -> None:
        stream = await self._stream(engine, subject, scenario)
        check_protocol(stream, provider=subject.name, model="contract-model")

    @pytest.mark.parametrize("scenario", _ids(_ANSWERS))
    async def test_stream_delivers_the_answer(
        self, engine: Engine, subject: ProviderSubject, scenario: Scenario
    ) -> None:
        stream = await self._stream(engine, subject, scenario)
        assert stream.types[-1] == "done"
        assert stream.text == scenario.text
        assert stream.thinking == scenario.thinking
        assert [(c["name"], c["arguments"]) for c in stream.tool_calls()] == [
            (call.name, call.arguments) for call in scenario.tool_calls
        ]
        for call in stream.tool_calls():
            json.dumps(call["arguments"])  # arguments reassemble to JSON
        message = stream.message
        assert message is not None
        _check_answer(message, scenario)

    @pytest.mark.parametrize("scenario", _ids(_ERRORS))
    async def test_stream_reports_errors_in_band(
        self, engine: Engine, subject: ProviderSubject, scenario: Scenario
    ) -> None:
        stream = await self._stream(engine, subject, scenario)
        error = stream.error
        assert error is not None, stream.types
        assert error["kind"] == scenario.error_kind
        assert scenario.error_message in error["message"]
        if scenario.retry_after is not None:
            assert error["retry_after"] == scenario.retry_after
        assert "done" not in stream.types

    @pytest.mark.parametrize("scenario", _ids(SCENARIOS))
    async def test_complete_returns_the_message(
        self, engine: Engine, subject: ProviderSubject, scenario: Scenario
    ) -> None:
        self._require(subject, scenario)
        async with subject.serving(engine, scenario):
            message = await complete_function(subject.name).call(engine, contract_request())
        assert (message.provider, message.model) == (subject.name, "contract-model")
        if scenario.error_kind is None:
            _check_answer(message, scenario)
        else:
            assert message.stop_reason == "error"
            assert message.error_kind == scenario.error_kind

    async def test_concurrent_streams_stay_separate(
        self, engine: Engine, subject: ProviderSubject
    ) -> None:
        scenario = SCENARIOS["text_then_tool_call"]
        async with subject.serving(engine, scenario, calls=8):
            streams = await asyncio.gather(
                *(
                    collect_stream(engine, subject.name, contract_request(session_id=f"c{n}"))
                    for n in range(8)
                )
            )
        for stream in streams:
            check_protocol(stream, provider=subject.name, model="contract-model")
            assert stream.text == scenario.text
