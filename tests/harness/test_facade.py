"""The front door: ``tackroom.Harness`` with tools, structured output, events and approvals."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from tackroom import (
    AgentEnd,
    FunctionExecutionEnd,
    Harness,
    MessageUpdate,
    OutputInvalid,
    PendingApproval,
    SessionBusy,
    ToolCall,
    UsageError,
)
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, text_of
from tackroom.hooks import block
from tackroom.testing import FunctionModel, ModelInfo, ScriptedProvider


def call_then_say(name: str, arguments: dict[str, Any], answer: str) -> list[dict[str, Any]]:
    return [{"tool_calls": [{"name": name, "arguments": arguments}]}, {"text": answer}]


def results_of(messages: list[AgentMessage]) -> list[FunctionResultMessage]:
    return [m for m in messages if isinstance(m, FunctionResultMessage)]


async def test_a_tool_and_a_run(tmp_path: Path) -> None:
    harness = Harness(
        "scripted:demo", script=call_then_say("add", {"a": 2, "b": 3}, "5"), home=tmp_path
    )

    @harness.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with harness:
        result = await harness.run("What is 2 + 3?")
    assert result.output == "5"
    assert result.ok
    assert result.stop_reason == "end"
    assert result.session_id.startswith("s-")
    assert result.run_id.startswith("run-")
    assert [m.role for m in result.messages] == [
        "user",
        "assistant",
        "function_result",
        "assistant",
    ]
    (tool_result,) = results_of(result.messages)
    assert text_of(tool_result.content) == "5"
    assert tool_result.function_id == "tool::add"
    assert (tmp_path / "engine.db").exists()


def test_run_sync_keeps_one_loop_between_calls(tmp_path: Path) -> None:
    replies = iter(["first", "second"])
    with Harness(FunctionModel(lambda messages, info: next(replies)), home=tmp_path) as harness:
        one = harness.run_sync("a")
        two = harness.run_sync("b", session=one.session_id)
    assert (one.output, two.output) == ("first", "second")
    assert two.session_id == one.session_id


async def test_run_sync_refuses_inside_a_running_loop(tmp_path: Path) -> None:
    harness = Harness(FunctionModel(lambda m, i: "x"), home=tmp_path)
    with pytest.raises(UsageError, match="inside a running event loop"):
        harness.run_sync("a")


async def test_tool_schema_comes_from_hints_and_docstring(tmp_path: Path) -> None:
    seen: list[ModelInfo] = []

    def answer(messages: list[AgentMessage], info: ModelInfo) -> str:
        seen.append(info)
        return "ok"

    harness = Harness(FunctionModel(answer), home=tmp_path, tools=[])

    @harness.tool(idempotent=True, timeout=3)
    async def lookup(city: str, days: int = 1) -> dict[str, Any]:
        """Look up the weather.

        Args:
            city: The city's name, in English.
            days: How many days ahead.
        """
        return {"city": city}

    async with harness:
        await harness.run("weather?")
        catalog = {f.function_id: f for f in await harness.engine.list_functions()}
    traits = (catalog["tool::lookup"].request_schema or {})["x-tackroom"]
    assert traits == {"idempotent": True, "parallel": False, "name": "lookup", "timeout": 3.0}
    (tool,) = seen[0].tools
    assert tool.name == "lookup"
    assert tool.description == "Look up the weather."
    props = tool.parameters["properties"]
    assert props["city"] == {
        "description": "The city's name, in English.",
        "title": "City",
        "type": "string",
    }
    assert props["days"]["default"] == 1
    assert props["days"]["description"] == "How many days ahead."
    assert tool.parameters["required"] == ["city"]
    assert "x-tackroom" not in tool.parameters


class Weather(BaseModel):
    city: str
    celsius: float


async def test_sync_async_and_model_returning_tools(tmp_path: Path) -> None:
    script = [
        {
            "tool_calls": [
                {"name": "weather", "arguments": {"city": "Oslo"}},
                {"name": "shout", "arguments": {"text": "hi"}},
                {"name": "broken", "arguments": {}},
            ]
        },
        {"text": "done"},
    ]
    harness = Harness("scripted:demo", script=script, home=tmp_path)

    @harness.tool
    async def weather(city: str) -> Weather:
        """Weather now."""
        await asyncio.sleep(0)
        return Weather(city=city, celsius=-3.5)

    @harness.tool
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    @harness.tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    async with harness:
        result = await harness.run("go")
    by_call = {r.function_id: r for r in results_of(result.messages)}
    assert by_call["tool::weather"].details == {"city": "Oslo", "celsius": -3.5}
    assert text_of(by_call["tool::shout"].content) == "HI"
    assert by_call["tool::broken"].is_error
    assert "RuntimeError: disk on fire" in text_of(by_call["tool::broken"].content)


async def test_bad_arguments_go_back_to_the_model(tmp_path: Path) -> None:
    script = call_then_say("add", {"a": "two", "b": 3}, "sorry")
    harness = Harness("scripted:demo", script=script, home=tmp_path)

    @harness.tool
    def add(a: int, b: int) -> int:
        return a + b

    async with harness:
        result = await harness.run("add")
    (error,) = results_of(result.messages)
    assert error.is_error
    assert "a" in text_of(error.content)


async def test_a_tool_timeout_is_reported_not_waited_out(tmp_path: Path) -> None:
    harness = Harness("scripted:demo", script=call_then_say("slow", {}, "gave up"), home=tmp_path)

    @harness.tool(timeout=0.2)
    async def slow() -> str:
        await asyncio.sleep(30)
        return "late"

    started = time.monotonic()
    async with harness:
        result = await harness.run("go")
    assert time.monotonic() - started < 10
    (error,) = results_of(result.messages)
    assert error.is_error
    assert error.details == {"error": "timeout"}


class City(BaseModel):
    name: str
    population: int


async def test_output_type_returns_a_validated_instance(tmp_path: Path) -> None:
    harness = Harness(
        "scripted:demo",
        script=[{"text": '```json\n{"name": "Oslo", "population": 717710}\n```'}],
        home=tmp_path,
        output_type=City,
    )
    async with harness:
        result = await harness.run("Largest city of Norway?")
    assert result.output == City(name="Oslo", population=717710)
    assert result.output_retries == 0


async def test_output_type_retries_with_the_validation_errors(tmp_path: Path) -> None:
    prompts: list[str] = []

    def answer(messages: list[AgentMessage], info: ModelInfo) -> str:
        prompts.append(info.system_prompt)
        last = messages[-1]
        if len(prompts) == 1:
            return '{"name": "Oslo", "population": "many"}'
        assert last.role == "user"
        assert "population" in text_of(last.content)
        return '{"name": "Oslo", "population": 717710}'

    async with Harness(FunctionModel(answer), home=tmp_path) as harness:
        result = await harness.run("city?", output_type=City)
    assert result.output == City(name="Oslo", population=717710)
    assert result.output_retries == 1
    assert '"population"' in prompts[0]  # the schema is in the instructions
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


async def test_output_type_gives_up_after_the_retries(tmp_path: Path) -> None:
    model = FunctionModel(lambda m, i: "I cannot answer in JSON")
    async with Harness(model, home=tmp_path, output_type=City, output_retries=1) as harness:
        with pytest.raises(OutputInvalid, match="after 1 corrective retries") as failure:
            await harness.run("city?")
    assert failure.value.result.text == "I cannot answer in JSON"


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Pair:
    left: str
    right: str


@pytest.mark.parametrize(
    ("kind", "answer", "expected"),
    [
        (Point, '{"x": 1, "y": 2}', {"x": 1, "y": 2}),
        (Pair, 'Here: {"left": "a", "right": "b"}', Pair("a", "b")),
        (list[int], "[1, 2, 3]", [1, 2, 3]),
    ],
)
async def test_output_type_typed_dict_dataclass_and_list(
    tmp_path: Path, kind: Any, answer: str, expected: Any
) -> None:
    async with Harness(FunctionModel(lambda m, i: answer), home=tmp_path) as harness:
        result = await harness.run("?", output_type=kind)
    assert result.output == expected


async def test_stream_yields_typed_events_then_the_result(tmp_path: Path) -> None:
    harness = Harness(
        "scripted:demo", script=call_then_say("add", {"a": 1, "b": 1}, "It is two."), home=tmp_path
    )

    @harness.tool
    def add(a: int, b: int) -> int:
        return a + b

    async with harness:
        run = harness.stream("1 + 1?")
        events = [event async for event in run]
    kinds = [event.type for event in events]
    assert kinds[-1] == "agent_end"
    assert isinstance(events[-1], AgentEnd)
    text = "".join(
        e.data.delta for e in events if isinstance(e, MessageUpdate) and e.data.kind == "text"
    )
    assert text == "It is two."
    ends = [e for e in events if isinstance(e, FunctionExecutionEnd)]
    assert [e.data.function_id for e in ends] == ["tool::add"]
    assert run.result.output == "It is two."
    assert all(e.run_id == run.run_id for e in events)


async def test_a_provider_error_says_why(tmp_path: Path) -> None:
    def fail(messages: list[AgentMessage], info: ModelInfo) -> str:
        raise ConnectionError("the model server refused the connection")

    async with Harness(FunctionModel(fail), home=tmp_path) as harness:
        result = await harness.run("hi")
    assert not result.ok
    assert result.stop_reason == "error"
    assert result.error is not None
    assert "the model server refused the connection" in result.error


async def test_requires_approval_with_a_callback(tmp_path: Path) -> None:
    decided: list[PendingApproval] = []
    ran: list[str] = []

    def decide(pending: PendingApproval) -> bool:
        decided.append(pending)
        return bool(pending.arguments["path"] == "ok.txt")

    script = [
        {"tool_calls": [{"name": "delete", "arguments": {"path": "ok.txt"}}]},
        {"tool_calls": [{"name": "delete", "arguments": {"path": "secret.txt"}}]},
        {"text": "done"},
    ]
    harness = Harness("scripted:demo", script=script, home=tmp_path, on_approval=decide)

    @harness.tool(requires_approval=True)
    def delete(path: str) -> str:
        ran.append(path)
        return f"deleted {path}"

    async with harness:
        result = await harness.run("clean up")
    assert ran == ["ok.txt"]
    assert [p.function_id for p in decided] == ["tool::delete", "tool::delete"]
    first, second = results_of(result.messages)
    assert not first.is_error
    assert second.is_error
    assert result.output == "done"


async def test_requires_approval_without_a_callback_returns_the_pending_call(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    harness = Harness(
        "scripted:demo", script=call_then_say("pay", {"cents": 500}, "paid"), home=tmp_path
    )

    @harness.tool(requires_approval=True)
    def pay(cents: int) -> str:
        ran.append(str(cents))
        return "ok"

    async with harness:
        parked = await harness.run("pay the bill")
        assert parked.stop_reason == "awaiting_approval"
        assert not parked.ok
        (pending,) = parked.pending
        assert (pending.function_id, pending.arguments) == ("tool::pay", {"cents": 500})
        assert ran == []
        with pytest.raises(SessionBusy, match="busy"):
            await harness.run("again", session=parked.session_id)
        (listed,) = await harness.approvals.pending()
        assert (listed.function_call_id, listed.function_id) == (
            pending.function_call_id,
            "tool::pay",
        )
        await harness.approvals.approve(pending)
        result = await harness.wait(parked)
        assert await harness.approvals.pending() == []
    assert result.output == "paid"
    assert ran == ["500"]


async def test_a_hook_blocks_a_call(tmp_path: Path) -> None:
    harness = Harness(
        "scripted:demo", script=call_then_say("rm", {"path": "/"}, "blocked"), home=tmp_path
    )

    @harness.tool
    def rm(path: str) -> str:
        raise AssertionError("must not run")

    async def guard(call: dict[str, Any]) -> Any:
        return block("never at the root") if call["arguments"].get("path") == "/" else None

    harness.add_hook("before_function_call", guard)
    async with harness:
        result = await harness.run("rm /")
    (denied,) = results_of(result.messages)
    assert denied.is_error
    assert "never at the root" in text_of(denied.content)


async def test_a_model_object_streams_through_the_bus(tmp_path: Path) -> None:
    class Echo:
        name = "echo"

        async def stream(self, request: Any) -> Any:
            yield "you said: "
            yield text_of(request.messages[-1].content)

    async with Harness(Echo(), home=tmp_path) as harness:
        result = await harness.run("hello")
    assert result.output == "you said: hello"
    assert result.messages[-1].provider == "echo"  # type: ignore[union-attr]


async def test_function_model_sees_the_tools_and_results(tmp_path: Path) -> None:
    def answer(messages: list[AgentMessage], info: ModelInfo) -> str | ToolCall:
        results = results_of(messages)
        if not results:
            assert info.tool("double") is not None
            return ToolCall("double", {"n": 21})
        return f"the answer is {text_of(results[0].content)}"

    harness = Harness(FunctionModel(answer), home=tmp_path)

    @harness.tool
    def double(n: int) -> int:
        return n * 2

    async with harness:
        result = await harness.run("?")
    assert result.output == "the answer is 42"


async def test_a_scripted_provider_object_is_a_model(tmp_path: Path) -> None:
    provider = ScriptedProvider([{"text": "scripted hello"}], name="mine")
    async with Harness(provider, home=tmp_path) as harness:
        result = await harness.run("hi")
    assert result.output == "scripted hello"


def test_a_model_name_must_name_a_provider() -> None:
    with pytest.raises(UsageError, match="PROVIDER:MODEL"):
        Harness("gpt-5-mini")


async def test_a_tool_registered_inside_async_with_serves_the_next_run(tmp_path: Path) -> None:
    """``async with Harness(...)`` then ``@harness.tool``: the tool is offered to, and served
    for, every run from the next one on."""
    script = [{"text": "no tools yet"}, *call_then_say("double", {"n": 2}, "4")]
    async with Harness("scripted:demo", script=script, home=tmp_path) as harness:
        first = await harness.run("a", session="s")
        assert "tool::double" not in harness.offered_tools

        @harness.tool
        def double(n: int) -> int:
            """Double n."""
            return n * 2

        assert harness.register_tool(double).function is double  # the same tool: no change
        result = await harness.run("b", session="s")
    assert first.output == "no tools yet"
    (tool_result,) = results_of(result.messages)
    assert not tool_result.is_error, text_of(tool_result.content)
    assert text_of(tool_result.content) == "4"
    assert result.output == "4"


def test_what_is_fixed_once_started_says_when_to_set_it(tmp_path: Path) -> None:
    with Harness(FunctionModel(lambda m, i: "x"), home=tmp_path) as harness:
        harness.run_sync("a")
        with pytest.raises(
            UsageError, match="before the harness starts: set it before `async with`"
        ):
            harness.add_hook("before_thinking", lambda payload: None)
        with pytest.raises(UsageError, match="letters, digits"):
            harness.register_tool(lambda: 1)


async def test_a_mistyped_model_is_refused_with_the_nearest_names(tmp_path: Path) -> None:
    async with Harness("openai:gpt-5-mni", home=tmp_path) as harness:
        with pytest.raises(UsageError, match="unknown model gpt-5-mni for openai; did you mean"):
            await harness.run("hi")


async def test_a_start_retried_with_the_same_run_id_returns_that_run(tmp_path: Path) -> None:
    """A run id names one run: starting it again (a client retrying after a lost reply) starts
    nothing new and returns that run's result, even once it has ended."""
    replies = iter(["first", "second"])
    model = FunctionModel(lambda messages, info: next(replies))
    async with Harness(model, home=tmp_path) as harness:
        one = await harness.run("a", session="s", run_id="run-once")
        again = await harness.run("a", session="s", run_id="run-once")
        assert (again.run_id, again.output, again.stop_reason) == ("run-once", "first", "end")
        assert len(model.requests) == 1
        two = await harness.run("b", session="s")
    assert (one.output, two.output) == ("first", "second")
