"""Record a run through the OpenAI worker (fake SSE server), then replay it with no provider.

The recorded run makes two tool calls — ``add`` (a Python tool) and ``fs::write`` (a side effect)
— and streams its answer. The replay runs the real orchestrator on an engine of its own, on each
backend, with the server gone: its session's messages must be the recorded ones byte for byte,
the file must not be written again, and an edited system prompt must be named as the first
divergence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tackroom import Harness
from tackroom.contracts.cassette import Cassette
from tackroom.contracts.messages import AssistantMessage, FunctionResultMessage
from tackroom.contracts.sessions import MESSAGES, MessagesRequest
from tackroom.harness.replay import export_cassette, replay, save_cassette
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.testing.fake_llm import Answer, FakeOpenAIServer, FakeToolCall, Reply

pytestmark = pytest.mark.parametrize("backend", list(BACKENDS))

ANSWER = "2 + 3 = 5, and the sum is saved in notes/sum.txt for you."


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def openai_config(base_url: str) -> HarnessConfig:
    return HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "worker_config": {"openai": {"profiles": {"openai": {"base_url": base_url}}}},
        }
    )


@dataclass(frozen=True)
class Recording:
    cassette: Cassette
    messages: str
    """The recorded session's messages as JSON."""
    written: Path
    config: HarnessConfig
    """Points at the fake server, closed by now: the provider is unreachable."""


async def session_messages(engine_url: str, session_id: str) -> str:
    config = HarnessConfig(schema_version=1, engine=engine_url)
    host = Host.from_config(config, workers=["engine", "sessions"])
    await host.start()
    try:
        reply = await MESSAGES.call(host.engine, MessagesRequest(session_id=session_id))
    finally:
        await host.close()
    return json.dumps([item.message.model_dump(mode="json") for item in reply.messages])


@pytest.fixture
async def recording(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Recording:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-replay-test")
    home = tmp_path / "recorded"
    async with FakeOpenAIServer() as server:
        server.add(Answer(tool_calls=[FakeToolCall("add", {"a": 2, "b": 3}, id="call-add")]))
        write = {"path": "notes/sum.txt", "content": "5"}
        server.add(Answer(tool_calls=[FakeToolCall("fs__write", write, id="call-write")]))
        server.add(Reply.say(ANSWER, chunk=6))
        config = openai_config(server.base_url)
        async with Harness(
            "openai:gpt-5-mini",
            config=config,
            tools=[add, "fs::write"],
            home=home,
            engine=engine_url_for(backend, home),
            auto_approve=True,
            instructions="Answer with the sum.",
        ) as harness:
            result = await harness.run("What is 2 + 3? Save it.", session="s1", run_id="run-1")
            cassette = await export_cassette(harness.bus, "run-1")
            reply = await MESSAGES.call(harness.bus, MessagesRequest(session_id="s1"))
        assert not server.violations, server.violations
    assert result.output == ANSWER
    written = home / "workspaces" / "s1" / "notes" / "sum.txt"
    assert written.read_text() == "5"
    written.unlink()
    messages = json.dumps([item.message.model_dump(mode="json") for item in reply.messages])
    return Recording(cassette, messages, written, config)


async def test_the_cassette_is_derived_from_the_stored_run(recording: Recording) -> None:
    cassette = recording.cassette
    assert (cassette.provider, cassette.model, cassette.run_id) == ("openai", "gpt-5-mini", "run-1")
    assert "Answer with the sum." in cassette.system_prompt
    assert [t.function_id for t in cassette.tools] == ["fs::write", "tool::add"]
    assert [e.turn for e in cassette.exchanges] == [1, 2, 3]
    assert [e.context for e in cassette.exchanges] == [1, 3, 5]
    streamed = "".join(c.delta for c in cassette.exchanges[2].chunks if c.kind == "text")
    assert streamed == ANSWER
    assert [(c.call_id, c.function_id, c.ran) for c in cassette.tool_calls] == [
        ("call-add", "tool::add", True),
        ("call-write", "fs::write", True),
    ]
    gate = cassette.tool_calls[1].gate
    assert gate is not None
    assert gate.decision == "allow"
    assert cassette.tool_calls[1].duration_ms is not None
    # a file round trip keeps it whole
    assert Cassette.model_validate_json(cassette.model_dump_json()) == cassette


async def test_offline_replay_reproduces_the_messages_byte_for_byte(
    recording: Recording, backend: str, tmp_path: Path
) -> None:
    url = engine_url_for(backend, tmp_path / "replayed")
    report = await replay(recording.cassette, config=recording.config, engine=url)
    assert report.identical, report.divergence and report.divergence.describe()
    assert (report.model_calls, report.tool_calls, report.messages) == (3, 2, 6)
    assert report.final_text == ANSWER
    assert await session_messages(url, "s1") == recording.messages
    assert not recording.written.exists()  # fs::write answered from the cassette, not run


async def test_an_edited_system_prompt_is_the_first_divergence(
    recording: Recording, backend: str, tmp_path: Path
) -> None:
    edited = recording.cassette.system_prompt.replace("Answer with the sum.", "Answer in words.")
    url = engine_url_for(backend, tmp_path / "edited")
    report = await replay(recording.cassette, system_prompt=edited, engine=url)
    assert not report.identical
    divergence = report.divergence
    assert divergence is not None
    assert (divergence.where, divergence.turn, divergence.field) == ("request", 1, "system_prompt")
    assert "Answer with the sum." in divergence.recorded
    assert "Answer in words." in divergence.replayed
    text = divergence.describe()
    assert text.startswith("model call 1: the request differs, field system_prompt")
    assert report.tool_calls == 0
    assert not recording.written.exists()


async def test_a_changed_tool_schema_is_named(
    recording: Recording, backend: str, tmp_path: Path
) -> None:
    cassette = recording.cassette
    today = [tool.model_copy(deep=True) for tool in cassette.tools]
    today[1].description = "Add two integers, carefully."
    url = engine_url_for(backend, tmp_path / "schema")
    report = await replay(cassette, tools=today, engine=url)
    divergence = report.divergence
    assert divergence is not None
    assert divergence.field == "tools[1].description"
    assert divergence.turn == 1


async def test_the_cassette_scripts_a_regression_test(
    recording: Recording, backend: str, tmp_path: Path
) -> None:
    from tackroom.testing import Cassette as TestCassette

    path = tmp_path / "incident.json"
    save_cassette(recording.cassette, path)
    cassette = TestCassette.load(path)
    provider = cassette.as_provider()
    home = tmp_path / "regression"
    async with Harness(
        provider,
        tools=[add, "fs::write"],
        home=home,
        engine=engine_url_for(backend, home),
        auto_approve=True,
    ) as harness:
        result = await harness.run(cassette.prompt)
    provider.assert_consumed()
    assert result.output == ANSWER
    calls = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert [m.function_call_id for m in calls] == ["call-add", "call-write"]
    answers = [m for m in result.messages if isinstance(m, AssistantMessage)]
    assert {(m.provider, m.model) for m in answers} == {("openai", "gpt-5-mini")}
    # today's tools ran: this is the program under test, not a replay
    assert (home / "workspaces").is_dir()
