"""Seed 003's standard harness interface, written as the seed writes it, on a scripted agent::

    class ToolSpec:   name, description, input_schema, handler
    class AgentConfig: model_backend, system_prompt, max_iterations = 8,
                       tool_timeout_seconds = 15, context_window_limit = 12000, tool_names
    class Harness:
        def run(self, user_input: str, config: AgentConfig) -> AgentResult: ...
        def register_tool(self, spec: ToolSpec) -> None: ...
        def use_memory(self, memory: MemoryAdapter) -> None: ...
        def add_hook(self, event: str, fn: Callable) -> None: ...
        def set_tracer(self, tracer: Tracer) -> None: ...

Each test fails without the piece it names.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tackroom import AgentConfig, AgentResult, Harness, ToolSpec
from tackroom.contracts.messages import FunctionResultMessage, text_of
from tackroom.testing.spans import SpanRecorder

CITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


class Notes:
    """A MemoryAdapter as the seed's early projects write one: a list, searched by words."""

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.loads: list[tuple[str, int]] = []

    def save(self, text: str, metadata: dict[str, Any]) -> None:
        self.texts.append(text)

    def load(self, query: str, limit: int) -> list[str]:
        self.loads.append((query, limit))
        words = set(query.lower().strip("?").split())
        return [t for t in self.texts if words & set(t.lower().rstrip(".").split())][:limit]


def weather_tool(calls: list[dict[str, Any]]) -> ToolSpec:
    def get_weather(input: dict[str, Any]) -> dict[str, Any]:
        calls.append(input)
        return {"city": input["city"], "celsius": 3}

    return ToolSpec(
        name="get_weather",
        description="The weather in a city.",
        input_schema=CITY_SCHEMA,
        handler=get_weather,
    )


def weather_config(**changes: Any) -> AgentConfig:
    fields: dict[str, Any] = {
        "model_backend": "scripted:seed",
        "system_prompt": "You are a weather bot. Answer in Celsius.",
        "max_iterations": 8,
        "tool_timeout_seconds": 15,
        "context_window_limit": 12000,
        "tool_names": ["get_weather"],
    }
    return AgentConfig(**{**fields, **changes})


def results(result: AgentResult[Any]) -> list[FunctionResultMessage]:
    return [m for m in result.messages if isinstance(m, FunctionResultMessage)]


async def test_the_interface_runs_a_scripted_agent(tmp_path: Path) -> None:
    script = [
        {
            "expect": {
                "system_prompt_contains": "You are a weather bot.",
                "tools_include": ["get_weather"],
            },
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
        },
        {"expect": {"last_role": "function_result"}, "text": "3 °C in Oslo."},
    ]
    harness = Harness("scripted:seed", script=script, home=tmp_path)
    calls: list[dict[str, Any]] = []
    thinking: list[int] = []
    memory = Notes("The user lives in Oslo.")
    recorder = SpanRecorder()

    harness.register_tool(weather_tool(calls))
    harness.use_memory(memory)
    harness.add_hook("before_thinking", lambda request: thinking.append(request["turn"]))
    harness.set_tracer(recorder.provider)
    async with harness:
        result: AgentResult[Any] = await harness.run(
            "What is the weather in Oslo?", weather_config()
        )

    assert (result.ok, result.output) == (True, "3 °C in Oslo."), result.error
    assert calls == [{"city": "Oslo"}]
    assert thinking == [1, 2]  # two model calls: the tool call, then the answer
    assert memory.loads == [("What is the weather in Oslo?", 3)]
    assert "execute_tool get_weather" in recorder.names()
    recorder.shutdown()


async def test_a_handler_gets_the_input_dict_and_a_bad_input_is_refused_with_why(
    tmp_path: Path,
) -> None:
    script = [
        {"tool_calls": [{"name": "get_weather", "arguments": {"town": "Oslo"}}]},
        {"text": "I could not tell."},
    ]
    calls: list[dict[str, Any]] = []
    harness = Harness("scripted:seed", script=script, home=tmp_path)
    harness.register_tool(weather_tool(calls))
    async with harness:
        result = await harness.run("Weather?", weather_config())
    (refused,) = results(result)
    assert refused.is_error
    reason = text_of(refused.content)
    assert "'city' is a required property" in reason
    assert "'town' was unexpected" in reason
    assert calls == []


async def test_agent_config_governs_model_prompt_tools_and_window(tmp_path: Path) -> None:
    script = [
        {
            "expect": {
                "model": "backend-b",
                "system_prompt_contains": "You are a weather bot.",
                "tools_include": ["get_weather"],
                "tools_exclude": ["shout"],
            },
            "text": "ok",
        }
    ]
    harness = Harness("scripted:backend-a", script=script, home=tmp_path)
    harness.register_tool(weather_tool([]))

    @harness.tool
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    windows: list[int] = []
    prompts: list[str] = []

    def seen(request: dict[str, Any]) -> None:
        prompts.append(request["system_prompt"])

    harness.add_hook("before_thinking", seen)
    config = weather_config(model_backend="scripted:backend-b", context_window_limit=3000)
    async with harness:
        run = harness.stream("hi", config)
        async for event in run:
            if event.type == "context_assembled":
                windows.append(event.data.window_tokens)
    assert run.result.ok, run.result.error
    assert windows == [3000]
    assert prompts == ["You are a weather bot. Answer in Celsius."]  # verbatim, not appended


async def test_max_iterations_caps_the_model_calls(tmp_path: Path) -> None:
    again = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}
    harness = Harness("scripted:seed", script=[again] * 5 + [{"text": "done"}], home=tmp_path)
    calls: list[dict[str, Any]] = []
    harness.register_tool(weather_tool(calls))
    async with harness:
        result = await harness.run("Weather?", weather_config(max_iterations=2))
    assert result.stop_reason == "max_turns"
    assert len(calls) == 2


async def test_tool_timeout_seconds_cuts_a_slow_tool(tmp_path: Path) -> None:
    async def slow(input: dict[str, Any]) -> str:
        await asyncio.sleep(10)
        return "too late"

    script = [{"tool_calls": [{"name": "slow", "arguments": {}}]}, {"text": "gave up"}]
    harness = Harness("scripted:seed", script=script, home=tmp_path)
    harness.register_tool(
        ToolSpec(name="slow", description="Slow.", input_schema={"type": "object"}, handler=slow)
    )
    async with harness:
        result = await harness.run(
            "go", weather_config(tool_names=["slow"], tool_timeout_seconds=0.2)
        )
    (cut,) = results(result)
    assert cut.is_error
    assert "did not answer within 0.2s" in text_of(cut.content)
    assert cut.details == {"error": "timeout"}
    assert result.output == "gave up"
