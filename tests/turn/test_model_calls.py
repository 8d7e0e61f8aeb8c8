"""Model-call hooks, failover and tools written in text, end to end: the Harness, the openai
worker over the real SDK, fake OpenAI servers, on both engine backends where the engine matters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness, ModelSwitch
from tackroom.contracts.events import AgentEvent, MessageUpdate
from tackroom.contracts.messages import AssistantMessage, FunctionResultMessage, text_of
from tackroom.contracts.sessions import MESSAGES, MessagesRequest
from tackroom.hooks import block, replace
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import SpanRecorder
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.testing.fake_llm import (
    Answer,
    FakeAnthropicServer,
    FakeLLMServer,
    FakeOpenAIServer,
    Reply,
)

pytestmark = pytest.mark.parametrize("backend", list(BACKENDS))


def _profile(server: FakeLLMServer, **fields: Any) -> dict[str, Any]:
    return {"base_url": server.base_url, "api_key_env": "TEST_KEY", "catalog": False, **fields}


def _config(profiles: dict[str, Any], **agent: Any) -> HarnessConfig:
    return HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "agent": agent,
            "worker_config": {
                "openai": {
                    "retry": {"max_retries": 1, "base_delay": 0.01, "jitter": 0},
                    "profiles": {"openai": None, **profiles},
                }
            },
        }
    )


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KEY", "sk-test-model-calls")


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def _events(harness: Harness, prompt: str, **options: Any) -> tuple[list[AgentEvent], Any]:
    stream = harness.stream(prompt, **options)
    events = [event async for event in stream]
    return events, stream.result


# -- before_model_call / after_model_call ------------------------------------------------------


async def test_a_hook_blocks_a_banned_word(backend: str, tmp_path: Path) -> None:
    async def guard(call: dict[str, Any]) -> Any:
        said = json.dumps(call["messages"])
        return block("the word 'zorblax' is banned") if "zorblax" in said else None

    async with FakeOpenAIServer() as server:
        harness = Harness(
            "one:gpt-x",
            config=_config({"one": _profile(server)}),
            engine=engine_url_for(backend, tmp_path),
            home=tmp_path,
        )
        harness.add_hook("before_model_call", guard)
        async with harness:
            result = await harness.run("tell me about zorblax")
        assert server.requests == []  # the model never saw it
    assert (result.state, result.stop_reason) == ("stopped", "blocked")
    assert result.error is not None
    assert "'zorblax' is banned" in result.error
    assert "before_model_call" in result.error


async def test_a_hook_rewrites_the_system_prompt(backend: str, tmp_path: Path) -> None:
    async def pirate(call: dict[str, Any]) -> Any:
        return replace({**call, "system_prompt": "You are a pirate. Say arr.", "temperature": 0.2})

    async with FakeOpenAIServer() as server:
        server.add(Reply.say("arr"))
        harness = Harness(
            "one:gpt-x",
            config=_config({"one": _profile(server)}),
            engine=engine_url_for(backend, tmp_path),
            home=tmp_path,
        )
        harness.add_hook("before_model_call", pirate)
        async with harness:
            result = await harness.run("hello")
        (request,) = server.requests
    assert result.ok
    assert result.output == "arr"
    system = request.body["messages"][0]
    assert system["role"] == "system"
    assert system["content"] == "You are a pirate. Say arr."
    assert request.body["temperature"] == 0.2


async def test_a_hook_that_changes_the_model_blocks(backend: str, tmp_path: Path) -> None:
    async def sneaky(call: dict[str, Any]) -> Any:
        return replace({**call, "model": "gpt-expensive"})

    async with FakeOpenAIServer() as server:
        harness = Harness(
            "one:gpt-x",
            config=_config({"one": _profile(server)}),
            engine=engine_url_for(backend, tmp_path),
            home=tmp_path,
        )
        harness.add_hook("before_model_call", sneaky)
        async with harness:
            result = await harness.run("hello")
        assert server.requests == []
    assert result.stop_reason == "blocked"
    assert result.error is not None
    assert "read-only" in result.error


async def test_a_redactor_changes_the_stored_answer_and_holds_deltas(
    backend: str, tmp_path: Path
) -> None:
    async def redact(answer: dict[str, Any]) -> Any:
        message = answer["message"]
        content = [
            {**b, "text": b["text"].replace("hunter2", "[redacted]")} if b["type"] == "text" else b
            for b in message["content"]
        ]
        return replace({**answer, "message": {**message, "content": content}})

    async with FakeOpenAIServer() as server:
        server.add(Reply.say("the password is hunter2"))
        harness = Harness(
            "one:gpt-x",
            config=_config({"one": _profile(server)}),
            engine=engine_url_for(backend, tmp_path),
            home=tmp_path,
        )
        harness.add_hook("after_model_call", redact)
        async with harness:
            events, result = await _events(harness, "password?")
            path = await MESSAGES.call(harness.bus, MessagesRequest(session_id=result.session_id))
            stored = [entry.message for entry in path.messages]
    assert result.ok
    assert result.output == "the password is [redacted]"
    assert not [e for e in events if isinstance(e, MessageUpdate)]  # held back for the redactor
    assert "hunter2" not in json.dumps([e.model_dump(mode="json") for e in events])
    answers = [m for m in stored if isinstance(m, AssistantMessage)]
    assert [text_of(m.content) for m in answers] == ["the password is [redacted]"]
    assert answers[0].usage.output_tokens > 0  # usage kept as the provider reported it


async def test_after_model_call_blocks_the_answer(backend: str, tmp_path: Path) -> None:
    async def refuse(answer: dict[str, Any]) -> Any:
        return block("the answer leaks a secret")

    async with FakeOpenAIServer() as server:
        server.add(Reply.say("the password is hunter2"))
        harness = Harness(
            "one:gpt-x",
            config=_config({"one": _profile(server)}),
            engine=engine_url_for(backend, tmp_path),
            home=tmp_path,
        )
        harness.add_hook("after_model_call", refuse)
        async with harness:
            events, result = await _events(harness, "password?")
    assert result.stop_reason == "blocked"
    assert result.error is not None
    assert "leaks a secret" in result.error
    assert "hunter2" not in json.dumps([e.model_dump(mode="json") for e in events])
    assert result.usage.output_tokens > 0  # the refused answer was paid for


# -- failover ----------------------------------------------------------------------------------


async def test_failover_to_the_second_endpoint(backend: str, tmp_path: Path) -> None:
    async with FakeOpenAIServer() as down, FakeOpenAIServer() as up:
        down.add(Reply.server_error(), Reply.server_error())  # the try and its one retry
        up.add(Reply.say("answered by the backup"))
        harness = Harness(
            "primary:gpt-a -> backup:gpt-b",
            config=_config({"primary": _profile(down), "backup": _profile(up)}),
            engine=engine_url_for(backend, tmp_path),
            home=tmp_path,
        )
        async with harness:
            events, result = await _events(harness, "hello")
        assert [r.status for r in down.requests] == [500, 500]
        assert [r.model for r in up.requests] == ["gpt-b"]
    assert result.ok
    assert result.output == "answered by the backup"
    (switch,) = [e for e in events if isinstance(e, ModelSwitch)]
    assert (switch.data.from_provider, switch.data.from_model) == ("primary", "gpt-a")
    assert (switch.data.to_provider, switch.data.to_model) == ("backup", "gpt-b")
    assert switch.data.error_kind == "transient"
    assert switch.data.position == 1
    (answer,) = [m for m in result.messages if isinstance(m, AssistantMessage)]
    assert (answer.provider, answer.model) == ("backup", "gpt-b")


async def test_failover_across_providers_is_a_span_event(backend: str, tmp_path: Path) -> None:
    recorder = SpanRecorder()
    async with FakeOpenAIServer() as down, FakeAnthropicServer() as claude:
        down.add(Reply.server_error(status=503), Reply.server_error(status=503))
        claude.add(Reply.say("answered by claude"))
        config = _config({"primary": _profile(down)})
        sections = dict(config.worker_config)
        sections["anthropic"] = {"profiles": {"anthropic": _profile(claude)}}
        harness = Harness(
            "primary:gpt-a -> anthropic:claude-haiku-4-5",
            config=config.model_copy(update={"worker_config": sections}),
            engine=engine_url_for(backend, tmp_path),
            home=tmp_path,
            tracer_provider=recorder.provider,
        )
        async with harness:
            events, result = await _events(harness, "hello")
        assert [r.model for r in claude.requests] == ["claude-haiku-4-5"]
    assert result.output == "answered by claude"
    assert len([e for e in events if isinstance(e, ModelSwitch)]) == 1
    switched = [
        span
        for span in recorder.spans()
        if any(event.name == "tackroom.model_switch" for event in span.events)
    ]
    assert len(switched) == 1
    attributes = dict(switched[0].attributes or {})
    assert attributes["tackroom.model_switches"] == 1
    assert attributes["tackroom.model"] == "anthropic:claude-haiku-4-5"
    (event,) = [e for e in switched[0].events if e.name == "tackroom.model_switch"]
    assert dict(event.attributes or {})["tackroom.model_switch.from"] == "primary:gpt-a"
    recorder.shutdown()


async def test_no_failover_on_an_auth_error(backend: str, tmp_path: Path) -> None:
    async with FakeOpenAIServer() as denied, FakeOpenAIServer() as up:
        denied.add(Reply.unauthorized())
        harness = Harness(
            "primary:gpt-a -> backup:gpt-b",
            config=_config({"primary": _profile(denied), "backup": _profile(up)}),
            engine=engine_url_for(backend, tmp_path),
            home=tmp_path,
        )
        async with harness:
            events, result = await _events(harness, "hello")
        assert up.requests == []
    assert result.stop_reason == "error"
    assert not [e for e in events if isinstance(e, ModelSwitch)]


async def test_no_failover_once_deltas_were_shown(backend: str, tmp_path: Path) -> None:
    """A stream that broke after its first deltas went out is not replaced by another model's
    answer: the reader saw the start of this one."""
    async with FakeOpenAIServer() as flaky, FakeOpenAIServer() as up:
        flaky.add(Reply.disconnect(Answer(text="The answer is forty-", chunk=4), after=3))
        harness = Harness(
            "primary:gpt-a -> backup:gpt-b",
            config=_config({"primary": _profile(flaky), "backup": _profile(up)}),
            engine=engine_url_for(backend, tmp_path),
            home=tmp_path,
        )
        async with harness:
            events, result = await _events(harness, "hello")
        assert up.requests == []
    assert [e for e in events if isinstance(e, MessageUpdate)]  # something was shown
    assert not [e for e in events if isinstance(e, ModelSwitch)]
    assert result.stop_reason == "error"


async def test_a_route_chooses_the_model_by_task(backend: str, tmp_path: Path) -> None:
    async with FakeOpenAIServer() as general, FakeOpenAIServer() as coder:
        coder.add(Reply.say("def f(): ..."))
        general.add(Reply.say("hello"))
        config = _config(
            {"general": _profile(general), "coder": _profile(coder)},
            routes={"code": "coder:gpt-code -> general:gpt-a"},
        )
        harness = Harness(
            "general:gpt-a", config=config, engine=engine_url_for(backend, tmp_path), home=tmp_path
        )
        async with harness:
            coded = await harness.run("write f", task="code")
            plain = await harness.run("hi")
        assert [r.model for r in coder.requests] == ["gpt-code"]
        assert [r.model for r in general.requests] == ["gpt-a"]
    assert (coded.output, plain.output) == ("def f(): ...", "hello")


# -- tools written in text ---------------------------------------------------------------------


def _tool_call(name: str, arguments: dict[str, Any]) -> str:
    return "```tool_call\n" + json.dumps({"name": name, "arguments": arguments}) + "\n```"


async def test_a_text_tool_calling_profile_completes_a_tool_turn(
    backend: str, tmp_path: Path
) -> None:
    async with FakeOpenAIServer() as server:
        server.add(Reply.say("Let me add.\n" + _tool_call("add", {"a": 2, "b": 3})))
        server.add(Reply.say("2 + 3 = 5"))
        harness = Harness(
            "local:tiny",
            config=_config({"local": _profile(server, tool_calling="text")}),
            engine=engine_url_for(backend, tmp_path),
            tools=[add],
            home=tmp_path,
        )
        async with harness:
            result = await harness.run("What is 2 + 3?")
        first, second = server.requests
    assert result.ok
    assert result.output == "2 + 3 = 5"
    (tool_result,) = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert text_of(tool_result.content) == "5"
    assert "tools" not in first.body  # nothing native was offered
    system = first.body["messages"][0]["content"]
    assert "```tool_call" in system
    assert "- add: Add two integers." in system
    # The second request carries the call as text and its result as a user message.
    roles = [m["role"] for m in second.body["messages"]]
    assert "tool" not in roles
    assert second.body["messages"][-1]["role"] == "user"
    assert "Tool result of call" in json.dumps(second.body["messages"][-1])
    calls = next(m for m in result.messages if isinstance(m, AssistantMessage)).function_calls()
    assert [(c.tool_name, c.arguments) for c in calls] == [("add", {"a": 2, "b": 3})]


async def test_an_unreadable_text_call_gets_a_correction(backend: str, tmp_path: Path) -> None:
    async with FakeOpenAIServer() as server:
        server.add(Reply.say('```tool_call\n{"name": "add", "arguments": {"a": 2,\n```'))
        server.add(Reply.say(_tool_call("add", {"a": 2, "b": 3})))
        server.add(Reply.say("5"))
        harness = Harness(
            "local:tiny",
            config=_config({"local": _profile(server, tool_calling="text")}),
            engine=engine_url_for(backend, tmp_path),
            tools=[add],
            home=tmp_path,
        )
        async with harness:
            result = await harness.run("What is 2 + 3?")
        requests = server.requests
    assert result.ok
    assert result.output == "5"
    assert len(requests) == 3
    correction = requests[1].body["messages"][-1]
    assert correction["role"] == "user"
    assert "could not be read" in json.dumps(correction)
    assert "not valid JSON" in json.dumps(correction)
    # The correction is not kept: the session holds the answer that parsed.
    answers = [m for m in result.messages if isinstance(m, AssistantMessage)]
    assert len(answers) == 2
    assert answers[0].function_calls()
