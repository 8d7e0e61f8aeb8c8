"""tackroom.yaml: defaults, a full file, paths, and typed errors naming file, field and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.runtime import ConfigError, HarnessConfig, WorkerConfig, WorkerSpec, load_config
from tackroom.runtime.worker import WorkerContext
from tackroom.workers.engine.worker import WORKER as ENGINE_WORKER


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_when_no_file_exists(in_tmp: Path) -> None:
    config = load_config()
    assert config.path is None
    assert config.schema_version == 1
    assert config.engine == f"embedded:{in_tmp / '.tackroom' / 'engine.db'}"
    assert config.workers == ["engine"]
    assert config.tracing.exporter == "none"
    assert config.tracing.spans == "steps"
    assert config.endpoint.socket == in_tmp / ".tackroom" / "tackroom.sock"
    assert config.worker_config == {}


def test_a_full_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "harness.yaml",
        """\
schema_version: 1
engine: embedded:data/engine.db
tracing:
  exporter: otlp
  endpoint: http://localhost:4318/v1/traces
  service_name: my-harness
  spans: all
workers: [engine]
endpoint:
  socket: run/tackroom.sock
  max_frame_bytes: 65536
worker_config:
  engine: {}
""",
    )
    config = load_config(path)
    assert config.path == path
    assert config.engine == f"embedded:{tmp_path.resolve() / 'data' / 'engine.db'}"
    assert config.tracing.exporter == "otlp"
    assert config.tracing.to_tracing_config().endpoint == "http://localhost:4318/v1/traces"
    assert config.tracing.service_name == "my-harness"
    assert config.tracing.to_tracing_config().spans == "all"
    assert config.endpoint.socket == tmp_path.resolve() / "run" / "tackroom.sock"
    assert config.endpoint.max_frame_bytes == 65536


def test_memory_engine_and_absolute_paths_are_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.yaml",
        "schema_version: 1\nengine: 'embedded::memory:'\nendpoint: {socket: /run/x.sock}\n",
    )
    config = load_config(path)
    assert config.engine == "embedded::memory:"
    assert config.endpoint.socket == Path("/run/x.sock")


def test_an_explicit_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file") as caught:
        load_config(tmp_path / "missing.yaml")
    assert caught.value.path == tmp_path / "missing.yaml"


def test_unknown_top_level_key_names_file_field_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "schema_version: 1\nworkers: [engine]\nengnie: x\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    error = caught.value
    assert (error.path, error.field, error.line) == (path, "engnie", 3)
    assert "unknown key" in error.reason
    assert "did you mean 'engine'?" in error.reason
    assert str(error).startswith(f"{path}:3: engnie: unknown key")


def test_unknown_nested_key_lists_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "schema_version: 1\ntracing:\n  exportr: console\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert (caught.value.field, caught.value.line) == ("tracing.exportr", 3)
    assert "did you mean 'exporter'?" in caught.value.reason
    known = "known: exporter, exporters, endpoint, service_name, bus, store, spans"
    assert known in caught.value.reason


def test_a_bad_value_names_its_field_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "schema_version: 1\ntracing:\n  exporter: jaeger\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert (caught.value.field, caught.value.line) == ("tracing.exporter", 3)
    assert "'none', 'console', 'otlp' or 'bus'" in caught.value.reason


def test_tracing_spans_is_steps_or_all(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "schema_version: 1\ntracing:\n  spans: hops\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert (caught.value.field, caught.value.line) == ("tracing.spans", 3)
    assert "'steps' or 'all'" in caught.value.reason


def test_bad_yaml_is_a_typed_error_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "schema_version: 1\nworkers: [engine\nengine: x\n")
    with pytest.raises(ConfigError, match="invalid YAML") as caught:
        load_config(path)
    assert caught.value.line == 3


def test_schema_version_is_required_and_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Field required") as caught:
        load_config(write(tmp_path / "a.yaml", "workers: [engine]\n"))
    assert caught.value.field == "schema_version"
    with pytest.raises(ConfigError, match="unsupported schema_version 2") as caught:
        load_config(write(tmp_path / "b.yaml", "schema_version: 2\n"))
    assert caught.value.line == 1


def test_the_top_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(write(tmp_path / "t.yaml", "- engine\n"))


class _Tuned(WorkerConfig):
    depth: int = 1


async def _noop(ctx: WorkerContext[_Tuned]) -> None:
    return None


TUNED = WorkerSpec(name="tuned", description="", config_model=_Tuned, start=_noop)


def test_worker_sections_validate_against_the_workers_model(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.yaml",
        "schema_version: 1\nworker_config:\n  tuned:\n    depth: 3\n",
    )
    assert load_config(path).worker_settings(TUNED) == _Tuned(depth=3)
    assert HarnessConfig.defaults().worker_settings(TUNED) == _Tuned()
    assert load_config(path).worker_settings(ENGINE_WORKER) == ENGINE_WORKER.config_model()


def test_worker_section_errors_name_the_field_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.yaml",
        "schema_version: 1\nworker_config:\n  tuned:\n    depth: 3\n    width: 2\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path).worker_settings(TUNED)
    assert (caught.value.field, caught.value.line) == ("worker_config.tuned.width", 5)
    assert "known: depth" in caught.value.reason


def test_a_section_for_an_unknown_worker_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "schema_version: 1\nworker_config:\n  engin: {}\n")
    with pytest.raises(ConfigError, match="did you mean engine") as caught:
        load_config(path).check_worker_sections(["engine", "tuned"])
    assert (caught.value.field, caught.value.line) == ("worker_config.engin", 3)


def test_a_section_that_takes_no_keys_says_so(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", "schema_version: 1\nworker_config:\n  engine:\n    x: 1\n")
    with pytest.raises(ConfigError, match=r"unknown key \(this section takes no keys\)"):
        load_config(path).worker_settings(ENGINE_WORKER)
