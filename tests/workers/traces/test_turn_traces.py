"""A turn's spans, from every worker, land in the trace store with their tree and GenAI attributes;
a failed model call is an error span with its error type and retries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness
from tackroom.contracts.traces import GET, LIST, GetRequest, ListRequest, SpanRecord, TraceDetail
from tackroom.engine import Engine
from tackroom.engine.tracing import build_tracer_provider, span_bus
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import wait_until
from tackroom.testing.fake_llm import FakeOpenAIServer, Reply

SCRIPT = [
    {
        "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}],
        "usage": {"input_tokens": 120, "output_tokens": 14, "cost_usd": 0.0021},
    },
    {"text": "2 + 3 = 5", "usage": {"input_tokens": 150, "output_tokens": 6}},
]


TURN = {"trigger run::start": 1, "queue turn::step": 1, "trigger tool::add": 1, "chat demo": 2}


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def traced(**worker_config: Any) -> HarnessConfig:
    return HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "tracing": {"exporters": ["bus"], "bus": {"flush_interval": 0.05}},
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


async def test_a_scripted_turn_is_one_trace_of_every_worker(tmp_path: Path) -> None:
    async with Harness(
        "scripted:demo", script=SCRIPT, tools=[add], home=tmp_path, config=traced()
    ) as harness:
        result = await harness.run("What is 2 + 3?")
        trace = await trace_of_run(harness.engine, result.run_id, holding=TURN)
    assert result.output == "2 + 3 = 5"
    assert (trace.run_id, trace.session_id) == (result.run_id, result.session_id)

    by_id = {span.span_id: span for span in trace.spans}
    (root,) = [span for span in trace.spans if span.parent_span_id is None]
    (step,) = named(trace, "queue turn::step")
    (tool,) = named(trace, "trigger tool::add")
    streams = named(trace, "trigger provider::scripted::stream")
    calls = named(trace, "chat demo")
    assert root.name == "trigger run::start"
    assert step.parent_span_id == root.span_id
    assert tool.parent_span_id == step.span_id
    assert [by_id[c.parent_span_id or ""] for c in calls] == streams
    assert {s.parent_span_id for s in streams} == {step.span_id}

    first, second = calls
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
    }
    assert second.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert {s.status for s in trace.spans} == {"ok"}, [
        (s.name, s.status_message) for s in trace.spans if s.status != "ok"
    ]
    assert root.attributes["session.id"] == result.session_id


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
            trace = await trace_of_run(
                harness.engine, result.run_id, holding={"chat gpt-5-mini": 1}
            )
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
