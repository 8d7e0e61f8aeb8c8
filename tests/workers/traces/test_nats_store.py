"""On NATS, each process ships its own spans; one store holds the trace they make together."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom.contracts.traces import GET, LIST, GetRequest, ListRequest, TraceDetail
from tackroom.engine import Engine
from tackroom.engine.factory import open_engine
from tackroom.engine.span_bus import BusSpanProcessor
from tackroom.engine.tracing import TracingConfig, build_tracer_provider, span_bus
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.testing import wait_until
from tackroom.testing.nats import nats_test_url


class _NoConfig(WorkerConfig):
    pass


def relay(name: str, *, then: str | None, plumbing: bool = False) -> WorkerSpec[_NoConfig]:
    """A worker serving ``name::hop``, which calls ``then::hop`` (when given) and answers;
    ``plumbing``: registered as a bus hop (no span of its own)."""

    async def start(ctx: WorkerContext[_NoConfig]) -> None:
        async def hop(payload: Any) -> str:
            if then is not None:
                await ctx.engine.trigger(f"{then}::hop", {"session_id": "s-nats"})
            return name

        await ctx.register_function(f"{name}::hop", hop, hop=plumbing)

    return WorkerSpec(name=name, description=name, config_model=_NoConfig, start=start)


def host(
    url: str, service: str, workers: list[WorkerSpec[Any]], config: HarnessConfig
) -> tuple[Host, BusSpanProcessor]:
    """A host on ``url`` whose spans, named ``service``, go to the bus (and its exporter)."""
    provider = build_tracer_provider(TracingConfig(exporter="bus", service_name=service))
    shipper = span_bus(provider)
    assert shipper is not None
    engine = open_engine(url, tracer_provider=provider)
    return Host(engine=engine, workers=workers, config=config, tracer_provider=provider), shipper


async def test_two_processes_spans_land_in_one_store(tmp_path: Path) -> None:
    url = nats_test_url(tmp_path)
    config = HarnessConfig.defaults().model_copy(
        update={"worker_config": {"traces": {"path": str(tmp_path / "traces.db")}}}
    )
    first, first_spans = host(url, "first", [load_worker("traces"), relay("a", then=None)], config)
    second, second_spans = host(url, "second", [relay("b", then="a")], config)
    async with first, second:
        assert await second.engine.trigger("b::hop", {"session_id": "s-nats"}) == "b"
        await first_spans.flush()
        await second_spans.flush()
        trace = await joint_trace(first.engine)
    spans = {span.name: span for span in trace.spans}
    assert set(spans) == {"trigger b::hop", "trigger a::hop"}
    assert spans["trigger a::hop"].parent_span_id == spans["trigger b::hop"].span_id
    assert spans["trigger b::hop"].service_name == "second"
    assert spans["trigger a::hop"].service_name == "first"
    assert trace.session_id == "s-nats"


async def test_a_hop_in_another_process_passes_the_trace_on(tmp_path: Path) -> None:
    url = nats_test_url(tmp_path)
    config = HarnessConfig.defaults().model_copy(
        update={"worker_config": {"traces": {"path": str(tmp_path / "traces.db")}}}
    )
    workers = [load_worker("traces"), relay("a", then=None), relay("b", then="m")]
    first, first_spans = host(url, "first", workers, config)
    second, second_spans = host(url, "second", [relay("m", then="a", plumbing=True)], config)
    async with first, second:
        assert await first.engine.trigger("b::hop", {"session_id": "s-nats"}) == "b"
        await second_spans.flush()
        await first_spans.flush()
        trace = await joint_trace(first.engine)
        assert second_spans.shipped == 0  # the hop made no span
    spans = {span.name: span for span in trace.spans}
    assert set(spans) == {"trigger b::hop", "trigger a::hop"}
    assert spans["trigger a::hop"].parent_span_id == spans["trigger b::hop"].span_id


async def joint_trace(engine: Engine) -> TraceDetail:
    found: list[TraceDetail] = []

    async def both() -> bool:
        listed = await LIST.call(engine, ListRequest(session_id="s-nats"))
        found[:] = [await GET.call(engine, GetRequest(trace_id=t.trace_id)) for t in listed.traces]
        return len(found) == 1 and len(found[0].spans) == 2

    await wait_until(both, message=lambda: f"one trace of two spans: {found}")
    return found[0]
