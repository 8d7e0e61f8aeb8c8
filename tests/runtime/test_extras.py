"""A missing optional package is one clear error naming the extra that installs it.

Each test hides a package the way an uninstalled one looks (``sys.modules[name] = None`` makes
``import name`` raise ``ModuleNotFoundError``) and drops tackroom's modules that imported it, so
they are imported afresh.
"""

from __future__ import annotations

import sys

import pytest

from tackroom.engine import open_engine
from tackroom.engine.embedded import EmbeddedEngine
from tackroom.engine.tracing import TracingConfig, build_tracer_provider
from tackroom.extras import MissingExtra, extra_of, import_extra
from tackroom.kit.providers.hosting import MissingSDK
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.errors import WorkerLoadError, WorkerStartError
from tackroom.runtime.host import Host
from tackroom.runtime.registry import load_worker


def hide(monkeypatch: pytest.MonkeyPatch, package: str, *importers: str) -> None:
    """Make ``package`` look uninstalled and forget the modules under ``importers``."""
    for name in list(sys.modules):
        if name == package or name.startswith(f"{package}."):
            monkeypatch.delitem(sys.modules, name)
        if any(name == prefix or name.startswith(f"{prefix}.") for prefix in importers):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, package, None)


def test_each_optional_package_maps_to_its_extra() -> None:
    assert extra_of("openai.types.chat") == "openai"
    assert extra_of("opentelemetry.sdk.trace") == "otel"
    assert extra_of("opentelemetry.exporter.otlp.proto.http") == "otel"
    assert extra_of("opentelemetry.trace") is None  # the API is a core dependency
    assert extra_of("cedarpy") == "cedar"
    assert extra_of("pytest") == "testing"
    assert extra_of("yaml") is None


@pytest.mark.parametrize("worker", ["openai", "anthropic"])
async def test_a_provider_worker_without_its_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, worker: str
) -> None:
    spec = load_worker(worker)  # loads without the SDK: it is imported when the worker starts
    hide(monkeypatch, worker, f"tackroom.workers.{worker}.wire")
    host = Host(engine=EmbeddedEngine(path=None), workers=[spec], config=HarnessConfig.defaults())
    with pytest.raises(WorkerStartError) as caught:
        await host.start()
    cause = caught.value.__cause__
    assert isinstance(cause, MissingSDK)
    assert cause.extra == worker
    assert f"pip install 'tackroom[{worker}]'" in str(caught.value)


def test_the_cedar_policy_worker_without_cedarpy_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide(monkeypatch, "cedarpy", "tackroom.workers.policy_cedar")
    with pytest.raises(WorkerLoadError, match=r"pip install 'tackroom\[cedar\]'") as caught:
        load_worker("policy-cedar")
    assert "'policy-cedar' worker" in str(caught.value)


def test_a_nats_url_without_nats_py_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "nats", "tackroom.engine.nats")
    with pytest.raises(MissingExtra, match=r"pip install 'tackroom\[nats\]'") as caught:
        open_engine("nats://localhost:4222")
    assert caught.value.extra == "nats"


@pytest.mark.parametrize(
    ("exporter", "package"),
    [("console", "opentelemetry.sdk"), ("otlp", "opentelemetry.exporter")],
)
def test_exporting_traces_without_the_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, exporter: str, package: str
) -> None:
    hide(monkeypatch, package)
    config = TracingConfig(exporter="console" if exporter == "console" else "otlp")
    with pytest.raises(MissingExtra, match=r"pip install 'tackroom\[otel\]'"):
        build_tracer_provider(config)


async def test_the_engine_runs_on_the_opentelemetry_api_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide(monkeypatch, "opentelemetry.sdk")
    assert build_tracer_provider(TracingConfig()) is None  # tracing off needs no SDK
    engine = open_engine("embedded::memory:")
    await engine.start()
    try:

        async def echo(payload: object) -> object:
            return payload

        await engine.register_function("test::echo", echo)
        assert await engine.trigger("test::echo", {"x": 1}) == {"x": 1}
    finally:
        await engine.close()


def test_the_contract_suites_without_pytest_name_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide(monkeypatch, "pytest", "tackroom.testing.contracts")
    with pytest.raises(MissingExtra, match=r"tackroom\[testing\]"):
        import tackroom.testing.contracts  # noqa: F401


def test_a_module_that_is_no_extra_fails_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tackroom_no_such_thing", None)
    with pytest.raises(ModuleNotFoundError) as caught:
        import_extra("tackroom_no_such_thing", needed_by="a test")
    assert not isinstance(caught.value, MissingExtra)
