"""A turn's spans, from every worker, land in the trace store with their tree and GenAI attributes:
one span per turn step, model call and tool call (no bus hop), on both engine backends; with
``tracing.spans: all`` every hop has its span again. A failed model call is an error span with its
error type and retries, and the step it ended is red too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from tackroom import Harness
from tackroom.contracts.principal import Principal
from tackroom.contracts.traces import GET, LIST, GetRequest, ListRequest, SpanRecord, TraceDetail
from tackroom.engine import Engine
from tackroom.engine.tracing import build_tracer_provider, span_bus
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import SpanRecorder, wait_until
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.testing.fake_llm import FakeOpenAIServer, Reply

SCRIPT = [
    {
        "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}],
        "usage": {"input_tokens": 120, "output_tokens": 14, "cost_usd": 0.0021},
    },
    {"text": "2 + 3 = 5", "usage": {"input_tokens": 150, "output_tokens": 6}},
]

TURN_OUTLINE = """\
trigger run::start
  turn.step provisioning
  turn.step assistant_streaming
    chat demo
  turn.step function_execute
    execute_tool add
    turn.step steering_check
  turn.step assistant_streaming
    chat demo
  turn.step steering_check
"""
"""The whole trace of the scripted turn: every span, indented under its parent, by start."""

TURN = {"trigger run::start": 1, "turn.step steering_check": 2, "chat demo": 2}
"""Enough of the trace to wait for (the last step's span ends last)."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def traced(*, spans: str = "steps", **worker_config: Any) -> HarnessConfig:
    return HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "tracing": {"exporters": ["bus"], "bus": {"flush_interval": 0.05}, "spans": spans},
            "worker_config": worker_config,
        }
    )


async def trace_of_run(engine: Engine, run_id: str, *, holding: dict[str, int]) -> TraceDetail:
    """The run's trace once the store holds ``holding`` spans of each name (at least)."""
    found: list[TraceDetail] = []

    async def stored() -> bool:
        listed = await LIST.call(engine, ListRequest(run_id=run_id))
        found[:] = [await GET.call(engine, GetRequest(trace_id=t.trace_id)) for t in listed.traces]
        return len(found) == 1 and all(
            len(named(found[0], name)) >= count for name, count in holding.items()
        )

    await wait_until(stored, message=lambda: f"{holding} in run {run_id}: {found}")
    return found[0]


def named(trace: TraceDetail, name: str) -> list[SpanRecord]:
    return [span for span in trace.spans if span.name == name]


def outline(trace: TraceDetail) -> str:
    """Each span's name on a line, indented two spaces a level under its parent, in start order
    (the spans of the store come by start time)."""
    children: dict[str | None, list[SpanRecord]] = {}
    for span in trace.spans:
        children.setdefault(span.parent_span_id, []).append(span)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append("  " * depth + span.name)
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return "".join(f"{line}\n" for line in lines)


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_tool_calling_turn_is_one_span_per_step_model_call_and_tool_call(
    backend: str, tmp_path: Path
) -> None:
    async with Harness(
        "scripted:demo",
        script=SCRIPT,
        tools=[add],
        home=tmp_path,
        engine=engine_url_for(backend, tmp_path),
        config=traced(),
    ) as harness:
        result = await harness.run("What is 2 + 3?")
        trace = await trace_of_run(harness.engine, result.run_id, holding=TURN)
    assert result.output == "2 + 3 = 5"
    assert (trace.run_id, trace.session_id) == (result.run_id, result.session_id)
    assert outline(trace) == TURN_OUTLINE
    assert {s.status for s in trace.spans} == {"ok"}, [
        (s.name, s.status_message) for s in trace.spans if s.status != "ok"
    ]
    (root,) = [span for span in trace.spans if span.parent_span_id is None]
    assert root.attributes["session.id"] == result.session_id

    steps = [span for span in trace.spans if span.name.startswith("turn.step ")]
    assert [s.attributes["tackroom.turn.step"] for s in steps] == [1, 2, 3, 4, 5, 6]
    assert [s.attributes["tackroom.turn.next_state"] for s in steps] == [
        "assistant_streaming",
        "function_execute",
        "assistant_streaming",  # the batch, committed with the steering check folded into it
        "assistant_streaming",
        "steering_check",
        "stopped",
    ]
    assert {s.attributes["run.id"] for s in steps} == {result.run_id}
    folded = [s for s in steps if s.attributes.get("tackroom.turn.folded")]
    assert [s.attributes["tackroom.turn.step"] for s in folded] == [4]
    assert all(s.attributes["tackroom.turn.committed"] is True for s in steps if s not in folded)

    (tool,) = named(trace, "execute_tool add")
    assert tool.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": tool.attributes["gen_ai.tool.call.id"],
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": result.session_id,
        "tackroom.function_id": "tool::add",
        "tackroom.lifecycle": "ACTING",
        "tackroom.input.summary": '{"a":2,"b":3}',
        "tackroom.output.summary": "5",
    }
    first, second = named(trace, "chat demo")
    assert first.kind == "client"
    assert first.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.system": "scripted",
        "gen_ai.request.model": "demo",
        "gen_ai.response.model": "demo",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 14,
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "tackroom.stop_reason": "function_call",
        "tackroom.cost_usd": 0.0021,
        "tackroom.retry_count": 0,
        "gen_ai.conversation.id": result.session_id,
        "tackroom.lifecycle": "THINKING",
        "tackroom.input.summary": "1 message, 1 tool; user: What is 2 + 3?",
        "tackroom.output.summary": '→ add({"a":2,"b":3})',
    }
    assert second.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert second.attributes["tackroom.output.summary"] == "2 + 3 = 5"


async def test_spans_all_gives_every_bus_hop_its_span_again(tmp_path: Path) -> None:
    async with Harness(
        "scripted:demo",
        script=SCRIPT,
        tools=[add],
        home=tmp_path,
        config=traced(spans="all"),
    ) as harness:
        result = await harness.run("What is 2 + 3?")
        holding = {**TURN, "trigger session-tree::append_batch": 1}
        trace = await trace_of_run(harness.engine, result.run_id, holding=holding)
    by_id = {span.span_id: span for span in trace.spans}

    def parent(span: SpanRecord) -> str:
        return by_id[span.parent_span_id or ""].name

    (step,) = named(trace, "queue turn::step")
    assert parent(step) == "trigger run::start"
    parents = {parent(s) for s in trace.spans if s.name.startswith("turn.step ")}
    assert parents == {step.name, "turn.step function_execute"}  # the folded steering check
    (tool,) = named(trace, "trigger tool::add")
    assert parent(tool) == "execute_tool add"  # the hop under the span that stands for it
    streams = named(trace, "trigger provider::scripted::stream")
    assert [parent(s) for s in streams] == ["turn.step assistant_streaming"] * 2
    assert [parent(c) for c in named(trace, "chat demo")] == [streams[0].name] * 2
    hops = {s.name for s in trace.spans} - {line.strip() for line in TURN_OUTLINE.splitlines()}
    assert {
        "queue turn::step",
        "trigger tool::add",
        "trigger provider::scripted::stream",
        "trigger session-tree::append_batch",
        "trigger session-tree::messages",
        "trigger session-inbox::peek",
    } <= hops


def quote(symbol: str) -> float:
    """The last price of a stock."""
    raise ConnectionError("the quote server is down")


async def test_a_tool_call_that_fails_is_a_red_span_under_its_step(tmp_path: Path) -> None:
    recorder = SpanRecorder()
    script = [
        {"tool_calls": [{"name": "quote", "arguments": {"symbol": "ACME"}}]},
        {"text": "The quote server is down."},
    ]
    async with Harness(
        "scripted:demo",
        script=script,
        tools=[quote],
        home=tmp_path,
        tracer_provider=recorder.provider,
    ) as harness:
        result = await harness.run("What does ACME cost?")
    assert result.output == "The quote server is down."
    (call,) = recorder.named("execute_tool quote")
    (step,) = recorder.named("turn.step function_execute")
    assert call.parent is not None
    assert call.parent.span_id == step.context.span_id
    assert call.status.status_code is StatusCode.ERROR
    assert call.status.description == (
        "tool::quote failed [connection_failed]: ConnectionError: the quote server is down"
    )
    assert dict(call.attributes or {})["error.type"] == "connection_failed"
    assert step.status.status_code is StatusCode.UNSET  # the turn goes on: the model reads it
    assert not recorder.named("trigger tool::quote")
    recorder.shutdown()


async def test_a_failed_model_call_is_an_error_span_with_its_type_and_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-trace-test")
    retry = {"max_retries": 2, "base_delay": 0.001, "jitter": 0}
    async with FakeOpenAIServer() as server:
        server.default = Reply.server_error("upstream is down")
        profiles = {"openai": {"base_url": server.base_url}}
        config = traced(openai={"retry": retry, "profiles": profiles})
        async with Harness(
            "openai:gpt-5-mini", config=config, home=tmp_path, check_model=False
        ) as harness:
            result = await harness.run("Hello?")
            holding = {"chat gpt-5-mini": 1, "turn.step assistant_streaming": 1}
            trace = await trace_of_run(harness.engine, result.run_id, holding=holding)
    (call,) = named(trace, "chat gpt-5-mini")
    assert result.stop_reason == "error"
    assert call.status == "error"
    assert call.status_message == "HTTP 500 (server_error): upstream is down"
    assert call.attributes["error.type"] == "transient"
    assert call.attributes["tackroom.retry_count"] == 2
    assert call.attributes["http.response.status_code"] == 500
    assert call.attributes["gen_ai.provider.name"] == "openai"
    assert [e.name for e in call.events] == ["tackroom.retry", "tackroom.retry"]
    assert {e.attributes["error.type"] for e in call.events} == {"transient"}
    (step,) = named(trace, "turn.step assistant_streaming")
    assert call.parent_span_id == step.span_id
    assert (step.status, step.attributes["error.type"]) == ("error", "transient")
    assert step.attributes["tackroom.turn.next_state"] == "stopped"
    assert [s.name for s in trace.spans if s.status == "error"] == [
        "turn.step assistant_streaming",
        "chat gpt-5-mini",
    ]


async def test_a_provider_given_by_the_program_ships_through_the_harness(tmp_path: Path) -> None:
    config = traced()
    provider = build_tracer_provider(config.tracing.to_tracing_config())
    assert provider is not None
    shipper = span_bus(provider)
    assert shipper is not None
    async with Harness(
        "scripted:demo",
        script=SCRIPT,
        tools=[add],
        home=tmp_path,
        config=config,
        tracer_provider=provider,
    ) as harness:
        result = await harness.run("What is 2 + 3?")
        trace = await trace_of_run(harness.engine, result.run_id, holding=TURN)
    assert len(named(trace, "chat demo")) == 2
    assert shipper.dropped == 0
    provider.shutdown()  # the program's provider: the harness leaves it running


async def test_each_step_span_names_who_the_run_acts_for(tmp_path: Path) -> None:
    recorder = SpanRecorder()
    principal = Principal(id="alice", tenant="acme", roles=("member",))
    async with Harness(
        "scripted:demo",
        script=[{"text": "hi"}],
        home=tmp_path,
        principal=principal,
        tracer_provider=recorder.provider,
    ) as harness:
        await harness.run("hello")
    steps = [s for s in recorder.spans() if s.name.startswith("turn.step ")]
    assert steps
    for step in steps:
        attributes = dict(step.attributes or {})
        assert (attributes["enduser.id"], attributes["tackroom.tenant"]) == ("alice", "acme")
    recorder.shutdown()
