"""``tackroom.yaml``: which engine, which workers, their config sections, tracing, the endpoint.

Relative paths in a file (the embedded engine's database, the endpoint socket) are relative to
the file's directory; without a file they are relative to the working directory. The file is
read strictly (:mod:`tackroom.runtime.yamlfile`: UTF-8, no duplicate key, bounded nesting). Every
error is a ``ConfigError`` naming the file, the dotted field and, when known, the line.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from tackroom.contracts.agents import AgentDefinition
from tackroom.contracts.context import ContextSettings
from tackroom.contracts.principal import Principal
from tackroom.contracts.redaction import RedactPattern
from tackroom.contracts.turn import Mode
from tackroom.engine.factory import parse_embedded_url
from tackroom.engine.tracing import DEFAULT_SUMMARY_CHARS, SpanMode, SummaryConfig, TracingConfig
from tackroom.runtime.confine import WorkerGrant
from tackroom.runtime.errors import ConfigError
from tackroom.runtime.installed import InstalledWorker
from tackroom.runtime.worker import WorkerSpec
from tackroom.runtime.yamlfile import YamlProblem, load_yaml, shown_key

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_ENGINE_URL",
    "DEFAULT_SOCKET_PATH",
    "SCHEMA_VERSION",
    "AgentSettings",
    "BusExportSettings",
    "EndpointSettings",
    "HarnessConfig",
    "TracingSettings",
    "load_config",
]

SCHEMA_VERSION = 1
DEFAULT_CONFIG_PATH = Path("tackroom.yaml")
DEFAULT_ENGINE_URL = "embedded:.tackroom/engine.db"
DEFAULT_SOCKET_PATH = Path(".tackroom") / "tackroom.sock"
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BusExportSettings(_Section):
    """The ``bus`` exporter's bounds: spans queued at most (more are dropped and counted), spans
    per stream record, seconds between two records while spans wait."""

    queue_size: int = Field(default=4096, ge=1)
    batch_size: int = Field(default=256, ge=1, le=4096)
    flush_interval: float = Field(default=1.0, gt=0, le=60)


class SpanSummarySettings(_Section):
    """``tracing.summaries``: an input and an output summary on every model and tool span
    (``tackroom.input.summary`` / ``tackroom.output.summary``), each at most ``max_chars``, with
    secrets scrubbed before a span is made: the redactor's patterns, ``extra_patterns`` and the
    values of the environment variables ``secret_env`` (the providers' key variables always)."""

    enabled: bool = True
    max_chars: int = Field(default=DEFAULT_SUMMARY_CHARS, ge=16, le=65_536)
    extra_patterns: list[RedactPattern] = Field(default_factory=list)
    secret_env: list[str] = Field(default_factory=list)

    def to_config(self) -> SummaryConfig:
        return SummaryConfig(
            enabled=self.enabled,
            max_chars=self.max_chars,
            patterns=tuple((p.name, p.regex) for p in self.extra_patterns),
            secret_env=tuple(self.secret_env),
        )


class TracingSettings(_Section):
    """``exporter`` (one) or ``exporters`` (several: ``[bus, otlp]``); ``store``: the worker
    booted with the agent workers to keep what the ``bus`` exporter ships (``null``: none here,
    one runs elsewhere); ``spans``: ``steps`` (a span per turn step, model call and tool call,
    none per bus hop) or ``all`` (a span per invocation: every hop, to debug the bus)."""

    exporter: Literal["none", "console", "otlp", "bus"] = "none"
    exporters: list[Literal["console", "otlp", "bus"]] | None = None
    endpoint: str | None = None
    service_name: str = "tackroom"
    bus: BusExportSettings = Field(default_factory=BusExportSettings)
    store: str | None = "traces"
    spans: SpanMode = "steps"
    summaries: SpanSummarySettings = Field(default_factory=SpanSummarySettings)

    @model_validator(mode="after")
    def _one_way(self) -> TracingSettings:
        if self.exporters is not None and self.exporter != "none":
            raise ValueError("set exporter or exporters, not both")
        return self

    def to_tracing_config(self) -> TracingConfig:
        return TracingConfig(
            exporter=self.exporter,
            endpoint=self.endpoint,
            service_name=self.service_name,
            exporters=tuple(self.exporters or ()),
            bus_queue_size=self.bus.queue_size,
            bus_batch_size=self.bus.batch_size,
            bus_flush_interval=self.bus.flush_interval,
            spans=self.spans,
            summaries=self.summaries.to_config(),
        )

    @property
    def exports_to_bus(self) -> bool:
        return "bus" in self.to_tracing_config().exporters_in_use()


class EndpointSettings(_Section):
    socket: Path = DEFAULT_SOCKET_PATH
    max_frame_bytes: int = Field(default=DEFAULT_MAX_FRAME_BYTES, ge=1024)

    @field_validator("socket")
    @classmethod
    def _socket_path(cls, value: Path) -> Path:
        return _no_nul(value)


class AgentSettings(_Section):
    """Defaults of ``tackroom run``: which model, which tools, how many model calls at most."""

    model: str | None = None
    """``PROVIDER:MODEL``, e.g. ``openai:gpt-4o-mini``; ``None``: pass ``--model``."""
    mode: Mode = "agent"
    tools: list[str] = Field(
        default_factory=lambda: [
            "fs::*",
            "calc::*",
            "clock::*",
            "shell::*",
            "code::*",
            "http::*",
            "mcp::*",
            "results::read",
        ]
    )
    """What ``tackroom run`` offers the model; the default policy asks before anything but
    reading files, arithmetic, the clock and the rest of a clipped result (``results::read``)."""
    max_turns: int = Field(default=8, ge=1)
    auto_approve: bool = False
    """Answer yes to every call the policy would ask a person about (``tackroom run --yes``);
    the policy's denials, plan mode and required permissions still hold."""
    principal: Principal | None = None
    """Who runs act for (``{id, roles}``); ``tackroom run`` uses the OS user when unset."""
    context: ContextSettings | None = None
    """The context budget: ``context_window_limit``, ``reserve_tokens``, ``keep_last``,
    ``compact``, ``recall`` (see docs/workers/compactor.md); unset: the orchestrator's."""
    routes: dict[str, str] = Field(default_factory=dict)
    """Task tag → model chain (``code: "openai:gpt-5-mini -> anthropic:claude-haiku-4-5"``): a
    run tagged with the task (``Harness.run(..., task="code")``) runs on that chain."""
    workers: list[str] = Field(
        default_factory=lambda: [
            "engine",
            "sessions",
            "catalog",
            "credentials",
            "directory",
            "orchestrator",
            "compactor",
            "files",
            "utilities",
            "sandbox",
            "shell",
            "http",
            "policy",
            "approvals",
            "tasks",
            "audit",
        ]
    )
    """The workers an agent run needs besides its provider (``mcp`` joins them when
    ``worker_config.mcp`` lists servers). With ``policy`` and ``approvals`` among them the gate
    is on (the orchestrator asks both unless its config names others)."""


class HarnessConfig(_Section):
    schema_version: int
    engine: str = DEFAULT_ENGINE_URL
    tracing: TracingSettings = TracingSettings()
    workers: list[str] = Field(default_factory=lambda: ["engine"])
    endpoint: EndpointSettings = EndpointSettings()
    worker_config: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    agent: AgentSettings = AgentSettings()
    agents: list[AgentDefinition] = Field(default_factory=list)
    """Agents the run's agent may call (``agent::<name>``) or hand over to (``handoff::<name>``);
    the ``agents`` worker serves them (docs/agents.md)."""
    worker_grants: dict[str, WorkerGrant] = Field(default_factory=dict)
    """Workers confined on the embedded bus to serving their own tools
    (:mod:`tackroom.runtime.confine`; on NATS: ``tackroom nats config``), by worker name."""
    installed_workers: dict[str, InstalledWorker] = Field(default_factory=dict)
    """Worker packages ``tackroom worker add`` installed, by worker name: they join the agent's
    boot list, and take a built-in's place only where ``replaces`` names it
    (:mod:`tackroom.runtime.installed`)."""

    _path: Path | None = PrivateAttr(default=None)
    _node: yaml.Node | None = PrivateAttr(default=None)

    @field_validator("engine")
    @classmethod
    def _engine_path(cls, value: str) -> str:
        return _no_nul(value)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            raise ValueError(
                f"unsupported schema_version {value} (this tackroom reads {SCHEMA_VERSION})"
            )
        return value

    @classmethod
    def defaults(cls) -> HarnessConfig:
        return cls(schema_version=SCHEMA_VERSION)

    @property
    def path(self) -> Path | None:
        """The file this config was read from (``None``: built-in defaults)."""
        return self._path

    def resolved(self, base: Path) -> HarnessConfig:
        """A copy whose relative paths are made absolute against ``base`` (private attrs kept)."""
        engine = self.engine
        if engine.startswith("embedded:"):
            db = parse_embedded_url(engine)
            if db is not None:
                engine = f"embedded:{(base / db).resolve()}"
        endpoint = self.endpoint.model_copy(
            update={"socket": (base / self.endpoint.socket).resolve()}
        )
        return self.model_copy(update={"engine": engine, "endpoint": endpoint})

    def worker_settings(self, spec: WorkerSpec[ConfigT]) -> ConfigT:
        """Validate the worker's section of ``worker_config`` (absent: ``{}``)."""
        raw = self.worker_config.get(spec.name) or {}
        try:
            return spec.config_model.model_validate(raw)
        except ValidationError as exc:
            raise _config_error(
                exc,
                path=self._path,
                node=self._node,
                model=spec.config_model,
                prefix=("worker_config", spec.name),
            ) from None

    def check_worker_sections(self, known: list[str]) -> None:
        """Every ``worker_config`` section must name a worker that exists (or is installed)."""
        known = [*known, *self.installed_workers]
        for name in self.worker_config:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ConfigError(
                    self._path,
                    f"no worker named {name!r}{hint}",
                    field=f"worker_config.{name}",
                    line=_line_of(self._node, ("worker_config", name), key=True),
                )


PathT = TypeVar("PathT", str, Path)


def _no_nul(value: PathT) -> PathT:
    """A path (or a URL naming one) the file system can take: no NUL character, and text the
    file system's encoding can hold (a lone surrogate such as ``\\ud800`` cannot be)."""
    text = str(value)
    if "\0" in text:
        raise ValueError("a path cannot hold a NUL character")
    try:
        os.fsencode(text)
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"a path cannot hold {text[exc.start]!a} (a lone surrogate, not a character)"
        ) from None
    return value


def load_config(path: Path | None = None) -> HarnessConfig:
    """Read ``path`` (default ``tackroom.yaml``; built-in defaults when that file is absent)."""
    if path is None:
        if not DEFAULT_CONFIG_PATH.exists():
            return HarnessConfig.defaults().resolved(Path.cwd())
        path = DEFAULT_CONFIG_PATH
    try:
        node, raw = load_yaml(path.read_bytes())
    except OSError as exc:
        raise ConfigError(path, f"cannot read config file: {exc.strerror or exc}") from exc
    except YamlProblem as exc:
        raise ConfigError(path, exc.reason, line=exc.line) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping at the top, got {type(raw).__name__}", line=1)
    try:
        config = HarnessConfig.model_validate(raw)
    except ValidationError as exc:
        raise _config_error(exc, path=path, node=node, model=HarnessConfig) from None
    config._path, config._node = path, node
    return config.resolved(path.parent.resolve())


def _config_error(
    exc: ValidationError,
    *,
    path: Path | None,
    node: yaml.Node | None,
    model: type[BaseModel],
    prefix: tuple[str, ...] = (),
) -> ConfigError:
    error = exc.errors(include_url=False)[0]
    loc = tuple(str(part) for part in error["loc"])
    field = ".".join(shown_key(part) for part in prefix + loc) or None
    if error["type"] == "extra_forbidden":
        known = _known_keys(model, loc[:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1)
        if not known:
            reason = "unknown key (this section takes no keys)"
        elif close:
            reason = f"unknown key; did you mean {close[0]!r}? (known: {', '.join(known)})"
        else:
            reason = f"unknown key (known: {', '.join(known)})"
        line = _line_of(node, prefix + loc, key=True)
    else:
        reason = str(error["msg"]).removeprefix("Value error, ")
        line = _line_of(node, prefix + loc, key=False)
    more = len(exc.errors()) - 1
    if more:
        reason += f" (and {more} more error{'s' if more > 1 else ''})"
    return ConfigError(path, reason, field=field, line=line)


def _known_keys(model: type[BaseModel], loc: tuple[str, ...]) -> list[str]:
    """The keys the model at ``loc`` (a path of field names) accepts."""
    current: type[BaseModel] = model
    for part in loc:
        annotation = current.model_fields[part].annotation if part in current.model_fields else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        current = annotation
    return list(current.model_fields)


def _line_of(node: yaml.Node | None, loc: tuple[str, ...], *, key: bool) -> int | None:
    """The 1-based line of ``loc`` in the composed YAML (its key's line if ``key``)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == part:
                    line = (key_node if last and key else value_node).start_mark.line + 1
                    node = value_node
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
            line = node.start_mark.line + 1
        else:
            return line
    return line
