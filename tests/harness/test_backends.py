"""The same small program on a real provider worker (fake OpenAI server) and on a NATS engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from tackroom import Harness
from tackroom.contracts.messages import FunctionResultMessage, text_of
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.fake_llm import Answer, FakeOpenAIServer, FakeToolCall, Reply
from tackroom.testing.nats import nats_test_url

SCRIPT = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_through_the_openai_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-facade-test")
    async with FakeOpenAIServer() as server:
        server.add(Answer(tool_calls=[FakeToolCall("add", {"a": 2, "b": 3})]))
        server.add(Reply.say("2 + 3 = 5"))
        config = HarnessConfig.model_validate(
            {
                "schema_version": 1,
                "worker_config": {
                    "openai": {"profiles": {"openai": {"base_url": server.base_url}}}
                },
            }
        )
        async with Harness("openai:gpt-5-mini", config=config, tools=[add], home=tmp_path) as h:
            result = await h.run("What is 2 + 3?")
        assert not server.violations, server.violations
        requests = server.requests
    assert result.output == "2 + 3 = 5"
    (tool_result,) = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert text_of(tool_result.content) == "5"
    assert [tool["function"]["name"] for tool in requests[0].body["tools"]] == ["add"]
    assert requests[0].body["model"] == "gpt-5-mini"


class Sum(BaseModel):
    total: int


async def test_on_a_nats_engine(tmp_path: Path) -> None:
    script = [*SCRIPT[:1], {"text": '{"total": 5}'}]
    engine = nats_test_url(tmp_path)
    async with Harness(
        "scripted:demo", script=script, engine=engine, tools=[add], home=tmp_path, output_type=Sum
    ) as harness:
        result = await harness.run("What is 2 + 3?")
    assert result.output == Sum(total=5)
    assert result.ok
