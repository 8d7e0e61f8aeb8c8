"""Tracing: one span per invocation (a hop's excepted), propagated across queues and triggers, with
baggage."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import baggage, context
from opentelemetry.sdk.trace import ReadableSpan

from tackroom.engine import Engine
from tackroom.engine.tracing import CALLER_SPAN_BAGGAGE, caller_span_for
from tackroom.testing import FAST_QUEUE, RecordingHandler, SpanRecorder, running_engine, wait_until


@contextmanager
def _baggage(**entries: str) -> Iterator[None]:
    ctx = context.get_current()
    for key, value in entries.items():
        ctx = baggage.set_baggage(key, value, context=ctx)
    token = context.attach(ctx)
    try:
        yield
    finally:
        context.detach(token)


def _parent_span_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_trigger_span_name_and_function_id_attribute(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    handler = RecordingHandler()
    await traced_engine.register_function("trace::leaf", handler)

    await traced_engine.trigger("trace::leaf", {}, timeout=5)

    span = await span_recorder.wait_for_span("trigger trace::leaf")
    assert span.attributes is not None
    assert span.attributes["tackroom.function_id"] == "trace::leaf"
    assert handler.calls[0].span_id == span.context.span_id  # the handler ran inside it


async def test_trigger_span_is_a_child_of_the_callers_span(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    await traced_engine.register_function("trace::leaf", RecordingHandler())

    with span_recorder.tracer().start_as_current_span("caller") as caller:
        await traced_engine.trigger("trace::leaf", {}, timeout=5)

    span = await span_recorder.wait_for_span("trigger trace::leaf")
    assert span.context.trace_id == caller.get_span_context().trace_id
    assert _parent_span_id(span) == caller.get_span_context().span_id


async def test_nested_trigger_is_a_child_span_in_the_same_trace(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    async def outer(payload: Any) -> Any:
        return await traced_engine.trigger("trace::inner", payload, timeout=5)

    await traced_engine.register_function("trace::inner", RecordingHandler())
    await traced_engine.register_function("trace::outer", outer)

    await traced_engine.trigger("trace::outer", {}, timeout=5)

    outer_span = await span_recorder.wait_for_span("trigger trace::outer")
    inner_span = await span_recorder.wait_for_span("trigger trace::inner")
    assert inner_span.context.trace_id == outer_span.context.trace_id
    assert _parent_span_id(inner_span) == outer_span.context.span_id


async def test_queue_delivery_is_a_child_of_the_producer(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    await traced_engine.configure_queue("jobs", FAST_QUEUE)
    handler = RecordingHandler()
    await traced_engine.register_function("trace::job", handler)

    with span_recorder.tracer().start_as_current_span("producer") as producer:
        await traced_engine.enqueue("trace::job", {}, queue="jobs")

    span = await span_recorder.wait_for_span("queue trace::job")
    assert span.context.trace_id == producer.get_span_context().trace_id
    assert _parent_span_id(span) == producer.get_span_context().span_id
    assert span.attributes is not None
    assert span.attributes["tackroom.function_id"] == "trace::job"
    [call] = await handler.wait_for_calls(1)
    assert call.trace_id == producer.get_span_context().trace_id


async def test_state_trigger_delivery_shares_the_writers_trace(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    await traced_engine.register_function("trace::on_state", RecordingHandler())
    await traced_engine.add_state_trigger("docs", "trace::on_state")

    with span_recorder.tracer().start_as_current_span("writer") as writer:
        await traced_engine.set_state("docs", "d1", {"v": 1})

    span = await span_recorder.wait_for_span("state_trigger trace::on_state")
    assert span.context.trace_id == writer.get_span_context().trace_id
    assert _parent_span_id(span) == writer.get_span_context().span_id


async def test_writers_committing_together_each_keep_their_trace(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    """Embedded writes them in one transaction, written by one of them: each trigger delivery
    is still a child of its own writer's span."""
    handler = RecordingHandler()
    await traced_engine.register_function("trace::on_state", handler)
    await traced_engine.add_state_trigger("docs", "trace::on_state")
    gate = asyncio.Event()
    writers: dict[str, int] = {}

    async def write(key: str) -> None:
        with span_recorder.tracer().start_as_current_span(f"writer {key}") as span:
            writers[key] = span.get_span_context().span_id
            await gate.wait()
            await traced_engine.set_state("docs", key, {"v": 1})

    tasks = [asyncio.create_task(write(f"d{i}")) for i in range(3)]
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(*tasks)

    spans = await span_recorder.wait_for_spans("state_trigger trace::on_state", 3)
    await wait_until(lambda: len(handler.calls) == 3)
    parents = {call.payload["key"]: call.span_id for call in handler.calls}
    by_span = {span.context.span_id: _parent_span_id(span) for span in spans}
    assert {key: by_span[span_id] for key, span_id in parents.items()} == writers


async def test_stream_trigger_delivery_shares_the_appenders_trace(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    await traced_engine.register_function("trace::on_record", RecordingHandler())
    await traced_engine.add_stream_trigger("chat", "trace::on_record")

    with span_recorder.tracer().start_as_current_span("appender") as appender:
        await traced_engine.append("chat", "s1", {"text": "hi"})

    span = await span_recorder.wait_for_span("stream_trigger trace::on_record")
    assert span.context.trace_id == appender.get_span_context().trace_id
    assert _parent_span_id(span) == appender.get_span_context().span_id


async def test_cron_invocation_runs_in_a_span(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    await traced_engine.register_function("trace::tick", RecordingHandler())
    registration = await traced_engine.add_cron_trigger("* * * * * *", "trace::tick")
    try:
        span = await span_recorder.wait_for_span("cron trace::tick")
    finally:
        await registration.unregister()
    assert span.attributes is not None
    assert span.attributes["tackroom.function_id"] == "trace::tick"


async def test_session_id_becomes_span_attribute_and_baggage(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    handler = RecordingHandler()
    await traced_engine.register_function("trace::chat", handler)

    await traced_engine.trigger("trace::chat", {"session_id": "s-42"}, timeout=5)

    span = await span_recorder.wait_for_span("trigger trace::chat")
    assert span.attributes is not None
    assert span.attributes["session.id"] == "s-42"
    assert handler.calls[0].baggage.get("session.id") == "s-42"


async def test_caller_baggage_is_merged_with_payload_baggage_on_trigger(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    async def read_baggage(payload: Any) -> Any:
        return {
            "tenant": baggage.get_baggage("tenant"),
            "session.id": baggage.get_baggage("session.id"),
        }

    await traced_engine.register_function("trace::bag", read_baggage)

    with _baggage(tenant="acme"):
        seen = await traced_engine.trigger("trace::bag", {"session_id": "s-7"}, timeout=5)

    assert seen == {"tenant": "acme", "session.id": "s-7"}


async def test_caller_baggage_is_merged_with_payload_baggage_across_a_queue(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    handler = RecordingHandler()
    await traced_engine.register_function("trace::bagq", handler)

    with _baggage(tenant="acme"):
        payload = {"session_id": "s-9", "run_id": "r-1", "message_id": "m-1"}
        await traced_engine.enqueue("trace::bagq", payload)

    [call] = await handler.wait_for_calls(1)
    assert call.baggage.get("tenant") == "acme"
    assert call.baggage.get("session.id") == "s-9"
    assert call.baggage.get("run.id") == "r-1"
    assert call.baggage.get("message.id") == "m-1"
    span = await span_recorder.wait_for_span("queue trace::bagq")
    assert span.attributes is not None
    assert span.attributes["session.id"] == "s-9"
    assert span.attributes["run.id"] == "r-1"
    assert span.attributes["message.id"] == "m-1"


async def test_tracing_off_emits_no_spans_and_everything_works(engine_url: str) -> None:
    async with running_engine(engine_url, tracer_provider=None) as engine:
        handler = RecordingHandler()
        await engine.register_function("plain::fn", handler)
        await engine.add_state_trigger("docs", "plain::fn")

        assert await engine.trigger("plain::fn", {"session_id": "s-1"}, timeout=5) is None
        await engine.enqueue("plain::fn", {"session_id": "s-1"})
        await engine.set_state("docs", "d1", {"v": 1})
        calls = await handler.wait_for_calls(3)

    assert sorted(str(c.kind) for c in calls) == ["queue", "state_trigger", "trigger"]
    assert not any(c.span_id for c in calls), "a span was active although tracing is off"


# -- hops: no span of their own, the trace passes through (tracing.spans: steps) -------------------


async def _serve_hop(engine: Engine, inner: RecordingHandler) -> None:
    """``trace::hop`` (a hop) calls ``trace::inner`` with a payload of its own."""

    async def hop(payload: Any) -> Any:
        return await engine.trigger("trace::inner", {"n": 1}, timeout=5)

    await engine.register_function("trace::inner", inner)
    await engine.register_function("trace::hop", hop, hop=True)


async def _serve_caller(engine: Engine) -> None:
    """``trace::caller`` calls ``trace::leaf`` under :func:`caller_span_for`, then
    ``trace::other``, which calls ``trace::leaf`` too; the leaf calls ``trace::inner``."""

    async def leaf(payload: Any) -> Any:
        return await engine.trigger("trace::inner", {}, timeout=5)

    async def other(payload: Any) -> Any:
        return await engine.trigger("trace::leaf", {}, timeout=5)

    async def caller(payload: Any) -> Any:
        with caller_span_for("trace::leaf"):
            await engine.trigger("trace::leaf", {}, timeout=5)
            await engine.trigger("trace::other", {}, timeout=5)

    for function_id, handler in [("trace::leaf", leaf), ("trace::other", other)]:
        await engine.register_function(function_id, handler)
    await engine.register_function("trace::caller", caller)


async def test_a_hop_called_makes_no_span_and_its_call_joins_the_callers_trace(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    inner = RecordingHandler()
    await _serve_hop(traced_engine, inner)

    with span_recorder.tracer().start_as_current_span("caller") as caller:
        await traced_engine.trigger("trace::hop", {"session_id": "s-hop"}, timeout=5)

    span = await span_recorder.wait_for_span("trigger trace::inner")
    assert span.context.trace_id == caller.get_span_context().trace_id
    assert _parent_span_id(span) == caller.get_span_context().span_id
    assert span.attributes is not None
    assert span.attributes["session.id"] == "s-hop"  # the hop's payload baggage passed on
    assert inner.calls[0].baggage.get("session.id") == "s-hop"
    assert span_recorder.names() == ["trigger trace::inner", "caller"]


async def test_a_hop_delivered_from_a_queue_passes_the_producers_trace_on(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    await traced_engine.configure_queue("jobs", FAST_QUEUE)
    inner = RecordingHandler()
    await _serve_hop(traced_engine, inner)

    with span_recorder.tracer().start_as_current_span("producer") as producer:
        await traced_engine.enqueue("trace::hop", {"run_id": "r-hop"}, queue="jobs")

    span = await span_recorder.wait_for_span("trigger trace::inner")
    assert span.context.trace_id == producer.get_span_context().trace_id
    assert _parent_span_id(span) == producer.get_span_context().span_id
    assert inner.calls[0].baggage.get("run.id") == "r-hop"
    assert "queue trace::hop" not in span_recorder.names()


async def test_a_call_its_callers_span_stands_for_makes_none_and_the_mark_goes_no_further(
    traced_engine: Engine, span_recorder: SpanRecorder
) -> None:
    inner = RecordingHandler()
    await traced_engine.register_function("trace::inner", inner)
    await _serve_caller(traced_engine)

    await traced_engine.trigger("trace::caller", {}, timeout=5)

    caller = await span_recorder.wait_for_span("trigger trace::caller")
    (other,) = span_recorder.named("trigger trace::other")
    (leaf,) = span_recorder.named("trigger trace::leaf")  # only the one trace::other made
    first, second = await span_recorder.wait_for_spans("trigger trace::inner", 2)
    assert _parent_span_id(first) == caller.context.span_id  # through the leaf without a span
    assert _parent_span_id(leaf) == other.context.span_id
    assert _parent_span_id(second) == leaf.context.span_id
    assert all(CALLER_SPAN_BAGGAGE not in call.baggage for call in inner.calls)


async def test_spans_all_gives_hops_and_stood_for_calls_their_spans(
    engine_url: str, span_recorder: SpanRecorder
) -> None:
    inner = RecordingHandler()
    async with running_engine(
        engine_url, tracer_provider=span_recorder.provider, trace_spans="all"
    ) as engine:
        await _serve_hop(engine, inner)
        await engine.trigger("trace::hop", {}, timeout=5)
        hop = await span_recorder.wait_for_span("trigger trace::hop")
        span = await span_recorder.wait_for_span("trigger trace::inner")
        assert _parent_span_id(span) == hop.context.span_id

        span_recorder.clear()
        await _serve_caller(engine)
        await engine.trigger("trace::caller", {}, timeout=5)
        caller = await span_recorder.wait_for_span("trigger trace::caller")
        leaves = await span_recorder.wait_for_spans("trigger trace::leaf", 2)
        assert _parent_span_id(leaves[0]) == caller.context.span_id
