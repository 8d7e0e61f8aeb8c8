"""Replays beyond the plain one: an earlier run of a session, a denied call, a live model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom import Harness
from tackroom.contracts.cassette import Cassette
from tackroom.contracts.messages import UserMessage
from tackroom.contracts.sessions import ENSURE, INBOX_PUSH, EnsureRequest, InboxPushRequest
from tackroom.harness.replay import export_cassette, replay
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.testing.fake_llm import Answer, FakeOpenAIServer, FakeToolCall, Reply

pytestmark = pytest.mark.parametrize("backend", list(BACKENDS))


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


SCRIPT = [
    {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}, "id": "c1"}]},
    {"text": "It is 5."},
    {"tool_calls": [{"name": "add", "arguments": {"a": 5, "b": 5}, "id": "c2"}]},
    {"text": "Now 10."},
]


async def record_two_runs(backend: str, home: Path) -> tuple[Cassette, Cassette]:
    url = engine_url_for(backend, home)
    async with Harness("scripted:m", script=SCRIPT, tools=[add], home=home, engine=url) as h:
        await h.run("What is 2 + 3?", session="s", run_id="run-a")
        await h.run("And plus 5?", session="s", run_id="run-b")
        return await export_cassette(h.bus, "run-a"), await export_cassette(h.bus, "s")


async def test_an_earlier_run_of_a_session_replays_too(backend: str, tmp_path: Path) -> None:
    first, second = await record_two_runs(backend, tmp_path / "rec")
    assert (first.run_id, second.run_id) == ("run-a", "run-b")
    assert first.history == []
    assert [e.entry_id for e in second.history] == [e.entry_id for e in first.messages]
    for index, cassette in enumerate((first, second)):
        url = engine_url_for(backend, tmp_path / f"replay{index}")
        report = await replay(cassette, engine=url)
        assert report.identical, report.divergence and report.divergence.describe()
        assert report.model_calls == 2


async def test_a_denied_call_is_replayed_as_it_was_decided(backend: str, tmp_path: Path) -> None:
    script = [
        {"tool_calls": [{"function_id": "fs::write", "arguments": {"path": "a", "content": "x"}}]},
        {"text": "I may not write in plan mode."},
    ]
    home = tmp_path / "rec"
    async with Harness(
        "scripted:m",
        script=script,
        tools=["fs::write"],
        home=home,
        engine=engine_url_for(backend, home),
        mode="plan",
    ) as harness:
        result = await harness.run("Write a file.", session="p", run_id="run-p")
        cassette = await export_cassette(harness.bus, "run-p")
    assert result.output == "I may not write in plan mode."
    (call,) = cassette.tool_calls
    assert call.gate is not None
    assert (call.gate.decision, call.ran, call.result.is_error) == ("deny", False, True)
    report = await replay(cassette, engine=engine_url_for(backend, tmp_path / "replay"))
    assert report.identical, report.divergence and report.divergence.describe()
    assert not (home / "workspaces" / "p" / "a").exists()


async def test_a_live_model_answers_on_the_recorded_tools(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = await record_two_runs(backend, tmp_path / "rec")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-replay")
    async with FakeOpenAIServer() as server:
        # Another model, its own call ids, the same call and answer: the same run.
        server.add(Answer(tool_calls=[FakeToolCall("add", {"a": 2, "b": 3}, id="x-9")]))
        server.add(Reply.say("It is 5."))
        # Then one that answers otherwise.
        server.add(Answer(tool_calls=[FakeToolCall("add", {"a": 2, "b": 3}, id="x-10")]))
        server.add(Reply.say("Five."))
        config = HarnessConfig.model_validate(
            {
                "schema_version": 1,
                "worker_config": {
                    "openai": {"profiles": {"openai": {"base_url": server.base_url}}}
                },
            }
        )
        same, other = [
            await replay(
                first,
                live_model="openai:gpt-5-mini",
                config=config,
                engine=engine_url_for(backend, tmp_path / name),
            )
            for name in ("same", "other")
        ]
        requests = server.requests
    assert same.identical, same.divergence and same.divergence.describe()
    assert (same.tool_calls, same.final_text) == (1, "It is 5.")
    assert requests[0].body["model"] == "gpt-5-mini"
    divergence = other.divergence
    assert divergence is not None
    assert (divergence.where, divergence.message_index) == ("messages", 3)
    assert divergence.field == "content[0].text"
    assert (divergence.recorded, divergence.replayed) == ('"It is 5."', '"Five."')


async def test_a_call_the_run_never_made_gets_no_result(backend: str, tmp_path: Path) -> None:
    first, _ = await record_two_runs(backend, tmp_path / "rec")
    async with FakeOpenAIServer() as server:
        server.add(Answer(tool_calls=[FakeToolCall("add", {"a": 1, "b": 1})]))
        server.add(Reply.say("Hm."))
        config = HarnessConfig.model_validate(
            {
                "schema_version": 1,
                "worker_config": {
                    "openai": {"profiles": {"openai": {"base_url": server.base_url}}}
                },
            }
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("OPENAI_API_KEY", "sk-live-replay")
            report = await replay(
                first,
                live_model="openai:gpt-5-mini",
                config=config,
                engine=engine_url_for(backend, tmp_path / "replay"),
            )
    assert report.divergence is not None
    assert report.divergence.field == "content[0].arguments.a"
    assert report.divergence.message_index == 1


@pytest.mark.parametrize(
    ("script", "max_turns", "stop_reason"),
    [
        ([{"error": {"kind": "permanent", "message": "the model is away"}}], 4, "error"),
        (SCRIPT[:1] * 2, 2, "max_turns"),
    ],
    ids=["provider-error", "max-turns"],
)
async def test_a_run_that_stopped_early_replays_as_it_stopped(
    backend: str, tmp_path: Path, script: list[dict[str, object]], max_turns: int, stop_reason: str
) -> None:
    home = tmp_path / "rec"
    url = engine_url_for(backend, home)
    async with Harness(
        "scripted:m", script=script, tools=[add], home=home, engine=url, max_turns=max_turns
    ) as harness:
        result = await harness.run("Go.", session="e", run_id="run-e")
        cassette = await export_cassette(harness.bus, "run-e")
    assert result.stop_reason == stop_reason
    assert cassette.stop_reason == stop_reason
    report = await replay(cassette, engine=engine_url_for(backend, tmp_path / "replay"))
    assert report.identical, report.divergence and report.divergence.describe()


async def test_a_steering_message_is_taken_again_after_the_same_call(
    backend: str, tmp_path: Path
) -> None:
    home = tmp_path / "rec"
    url = engine_url_for(backend, home)
    async with Harness("scripted:m", script=SCRIPT[:2], tools=[add], home=home, engine=url) as h:
        await ENSURE.call(h.bus, EnsureRequest(session_id="st"))
        # waiting before the run starts: the steering check after the first call takes it
        steer = UserMessage.text("Use words, not digits.")
        request = InboxPushRequest(session_id="st", name="steering", item=steer)
        await INBOX_PUSH.send(h.bus, request)
        await h.run("What is 2 + 3?", session="st", run_id="run-st")
        cassette = await export_cassette(h.bus, "run-st")
    assert cassette.steered(1) == [steer]
    assert cassette.exchanges[1].context == 4  # user, call, result, steering
    report = await replay(cassette, engine=engine_url_for(backend, tmp_path / "replay"))
    assert report.identical, report.divergence and report.divergence.describe()
