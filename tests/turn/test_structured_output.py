"""Structured output inside the turn, end to end over the real SDKs and fake provider servers:
the provider's native JSON-schema mode where the catalog says the model has it (the schema in
the prompt where it does not), and a wrong answer corrected by a second model call of the same
turn, whose usage the run counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tackroom import Harness, OutputInvalid
from tackroom.contracts.messages import UserMessage, text_of
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.fake_llm import (
    FakeAnthropicServer,
    FakeLLMServer,
    FakeOpenAIServer,
    FakeUsage,
    Reply,
)


class City(BaseModel):
    name: str
    population: int


OSLO = '{"name": "Oslo", "population": 717710}'
USAGE = FakeUsage(input_tokens=40, output_tokens=9)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KEY", "sk-test-structured")


def _config(worker: str, server: FakeLLMServer, *profiles: str) -> HarnessConfig:
    profile = {"base_url": server.base_url, "api_key_env": "TEST_KEY"}
    return HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "worker_config": {
                worker: {
                    "retry": {"max_retries": 0},
                    "profiles": dict.fromkeys(profiles, profile),
                }
            },
        }
    )


def _system(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    return str(first["content"]) if first["role"] in ("system", "developer") else ""


async def test_openai_is_asked_for_json_schema_when_the_catalog_says_the_model_can(
    tmp_path: Path,
) -> None:
    async with FakeOpenAIServer() as server:
        server.add(Reply.say(OSLO), Reply.say(OSLO))
        config = _config("openai", server, "openai", "deepseek")
        async with Harness("openai:gpt-4o-mini", config=config, home=tmp_path) as harness:
            native = await harness.run("Largest city of Norway?", output_type=City)
        async with Harness("deepseek:deepseek-chat", config=config, home=tmp_path) as harness:
            prompted = await harness.run("Largest city of Norway?", output_type=City)
        assert not server.violations, server.violations
        asked, plain = (request.body for request in server.requests)
    assert native.output == prompted.output == City(name="Oslo", population=717710)
    assert asked["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "City", "schema": City.model_json_schema(), "strict": False},
    }
    assert '"population"' not in _system(asked)  # not twice: the mode carries the schema
    assert "response_format" not in plain  # the catalog says deepseek-chat has no such mode
    assert '"population"' in _system(plain)


async def test_anthropic_is_asked_for_its_output_format(tmp_path: Path) -> None:
    async with FakeAnthropicServer() as server:
        server.add(Reply.say(OSLO))
        config = _config("anthropic", server, "anthropic")
        async with Harness("anthropic:claude-haiku-4-5", config=config, home=tmp_path) as h:
            result = await h.run("Largest city of Norway?", output_type=City)
        assert not server.violations, server.violations
        (request,) = server.requests
    assert result.output == City(name="Oslo", population=717710)
    form = request.body["output_config"]["format"]
    assert form["type"] == "json_schema"
    assert form["schema"]["additionalProperties"] is False  # as the API takes a schema
    assert set(form["schema"]["properties"]) == {"name", "population"}
    assert "population" not in str(request.body.get("system", ""))


async def test_an_invalid_answer_is_corrected_by_a_second_call_of_the_turn(tmp_path: Path) -> None:
    async with FakeOpenAIServer() as server:
        server.add(
            Reply.say('{"name": "Oslo", "population": "about 700k"}', usage=USAGE),
            Reply.say(OSLO, usage=USAGE),
        )
        config = _config("openai", server, "openai")
        async with Harness("openai:gpt-4o-mini", config=config, home=tmp_path) as harness:
            result = await harness.run("Largest city of Norway?", output_type=City)
            state = await harness.get_state(result.session_id)
        assert not server.violations, server.violations
        first, second = (request.body for request in server.requests)
    assert result.ok
    assert result.output == City(name="Oslo", population=717710)
    assert result.output_retries == 1
    # Both calls are the run's: one run, its usage the sum of the two answers.
    assert (result.usage.input_tokens, result.usage.output_tokens) == (80, 18)
    assert state is not None
    assert (state.run_id, state.turn_count) == (result.run_id, 2)
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    correction = result.messages[2]
    assert isinstance(correction, UserMessage)
    assert "population" in text_of(correction.content)
    # The corrective call reads the wrong answer and the correction, and asks natively again.
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert "is not of type 'integer'" in second["messages"][-1]["content"]
    assert second["response_format"] == first["response_format"]


async def test_the_run_ends_output_invalid_after_its_retries(tmp_path: Path) -> None:
    async with FakeOpenAIServer() as server:
        server.add(*(Reply.say("I cannot answer in JSON", usage=USAGE) for _ in range(2)))
        config = _config("openai", server, "openai")
        async with Harness(
            "openai:gpt-4o-mini", config=config, home=tmp_path, output_retries=1
        ) as harness:
            with pytest.raises(OutputInvalid, match="after 1 corrective retries") as failure:
                await harness.run("Largest city of Norway?", output_type=City)
        assert len(server.requests) == 2
    result = failure.value.result
    assert (result.state, result.stop_reason, result.output_retries) == (
        "stopped",
        "output_invalid",
        1,
    )
    assert result.usage.output_tokens == 18
    assert result.text == "I cannot answer in JSON"
