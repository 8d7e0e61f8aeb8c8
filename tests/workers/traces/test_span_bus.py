"""The bus exporter: bounded, never recursing, configured as one exporter of several; OTLP URLs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.traces import SPANS, SPANS_GROUP, SpanBatch
from tackroom.engine import Engine
from tackroom.engine.factory import open_engine
from tackroom.engine.tracing import (
    TracingConfig,
    build_tracer_provider,
    otlp_traces_url,
    span_bus,
)
from tackroom.runtime import ConfigError, load_config
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker
from tackroom.testing import memory_engine, wait_until
from tackroom.testing.http_server import LocalHTTPServer, Reply


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("http://collector:4318", "http://collector:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("https://otel.example/v1/traces", "https://otel.example/v1/traces"),
        ("https://otel.example/custom/path", "https://otel.example/custom/path"),
    ],
)
def test_an_otlp_endpoint_may_be_a_base_url(given: str, used: str) -> None:
    assert otlp_traces_url(given) == used


async def test_otlp_beside_the_bus_posts_to_the_base_url_plus_v1_traces() -> None:
    async with LocalHTTPServer({"/v1/traces": Reply(status=200)}) as server:
        base = server.url("/").rstrip("/")
        provider = build_tracer_provider(TracingConfig(exporters=("bus", "otlp"), endpoint=base))
        assert provider is not None
        assert span_bus(provider) is not None
        provider.get_tracer("test").start_span("exported").end()
        assert await asyncio.to_thread(provider.force_flush, 5000)
        provider.shutdown()
    assert [(r.method, r.path) for r in server.received] == [("POST", "/v1/traces")]
    assert b"exported" in server.received[0].body


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tackroom.yaml"
    path.write_text("schema_version: 1\n" + text)
    return path


def test_exporter_and_exporters_in_tackroom_yaml(tmp_path: Path) -> None:
    one = load_config(write(tmp_path, "tracing: {exporter: bus}\n")).tracing
    several = load_config(write(tmp_path, "tracing: {exporters: [bus, otlp]}\n")).tracing
    assert one.to_tracing_config().exporters_in_use() == ("bus",)
    assert several.to_tracing_config().exporters_in_use() == ("bus", "otlp")
    assert (one.exports_to_bus, several.exports_to_bus) == (True, True)
    assert not HarnessConfig.defaults().tracing.exports_to_bus
    with pytest.raises(ConfigError, match="set exporter or exporters, not both"):
        load_config(write(tmp_path, "tracing: {exporter: otlp, exporters: [bus]}\n"))
    with pytest.raises(ConfigError, match=r"tracing\.exporters"):
        load_config(write(tmp_path, "tracing: {exporters: [jaeger]}\n"))


def bus_provider(**bounds: Any) -> Any:
    provider = build_tracer_provider(TracingConfig(exporter="bus", bus_flush_interval=60, **bounds))
    assert provider is not None
    return provider


async def records(engine: Engine) -> list[SpanBatch]:
    return [batch for _, batch in await SPANS.read(engine, SPANS_GROUP)]


async def test_a_full_queue_drops_spans_counts_them_and_says_so_in_the_next_record() -> None:
    provider = bus_provider(bus_queue_size=3, bus_batch_size=2)
    shipper = span_bus(provider)
    assert shipper is not None
    tracer = provider.get_tracer("test")
    async with memory_engine() as engine:
        await shipper.attach(engine)
        for n in range(5):  # nothing ships on its own before the interval (60 s): 3 fit
            tracer.start_span(f"s{n}").end()
        assert shipper.dropped == 2
        await shipper.flush()
        shipped = await records(engine)
        await shipper.detach(engine)
    assert [[s.name for s in r.spans] for r in shipped] == [["s0", "s1"], ["s2"]]
    assert [r.dropped for r in shipped] == [2, 0]
    assert (shipper.shipped, shipper.dropped) == (3, 2)
    provider.shutdown()


async def test_spans_wait_for_an_engine_and_go_out_when_it_detaches() -> None:
    provider = bus_provider()
    shipper = span_bus(provider)
    assert shipper is not None
    provider.get_tracer("test").start_span("before the engine").end()
    async with memory_engine() as engine:
        await shipper.attach(engine)
        provider.get_tracer("test").start_span("while attached").end()
        await shipper.detach(engine)
        (shipped,) = await records(engine)
    assert [s.name for s in shipped.spans] == ["before the engine", "while attached"]
    assert shipped.spans[0].service_name == "tackroom"
    provider.shutdown()


async def test_the_store_never_sees_its_own_work(tmp_path: Path) -> None:
    provider = bus_provider()
    shipper = span_bus(provider)
    assert shipper is not None
    config = HarnessConfig.defaults().model_copy(
        update={"worker_config": {"traces": {"path": str(tmp_path / "traces.db")}}}
    )
    engine = open_engine("embedded::memory:", tracer_provider=provider)
    host = Host(
        engine=engine,
        workers=[load_worker("traces")],
        config=config,
        tracer_provider=provider,
        owns_tracer_provider=False,
    )
    async with host:
        await engine.register_function("demo::ping", pong)
        await engine.trigger("traces::list", {})
        await engine.trigger("demo::ping")
        await engine.trigger("traces::status", {})
        await shipper.flush()
        shipped = await records(engine)
        await wait_until(lambda: stored(engine, 1))
        await engine.trigger("traces::get", {"trace_id": shipped[0].spans[0].trace_id})
        await shipper.flush()
        assert await records(engine) == shipped  # reading and answering made no span
    assert [[s.name for s in r.spans] for r in shipped] == [["trigger demo::ping"]]
    provider.shutdown()


async def pong(payload: Any) -> str:
    return "pong"


async def stored(engine: Engine, spans: int) -> bool:
    status = await engine.trigger("traces::status", {})
    return bool(status["spans"] == spans)
