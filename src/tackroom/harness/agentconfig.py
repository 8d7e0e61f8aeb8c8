"""``AgentConfig`` for programs: the contract's model, read from and written to YAML.

    config = AgentConfig.from_yaml(Path("agent.yaml").read_text())
    result = harness.run_sync("What is 2 + 3?", config=config)

A file may hold the config itself (seed 003's field names) or be a ``tackroom.yaml``, whose
``agent:`` section is read (:meth:`AgentConfig.from_settings`: ``model`` is ``model_backend``,
``max_turns`` is ``max_iterations``, ``tools`` is ``tool_names``). The fields, and what each
becomes in a run request, are in :mod:`tackroom.contracts.agentconfig`; :func:`configured`
is how the facade lets a config fill the request it builds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tackroom.contracts import agentconfig as contract
from tackroom.contracts.context import ContextSettings
from tackroom.contracts.turn import RunStartRequest
from tackroom.harness.errors import UsageError
from tackroom.runtime.config import AgentSettings, HarnessConfig
from tackroom.runtime.typed import describe_validation_error
from tackroom.runtime.yamlfile import YamlProblem, load_yaml

__all__ = ["AgentConfig", "as_agent_config", "configured"]


class AgentConfig(contract.AgentConfig):
    """One agent's configuration (seed 003): ``model_backend``, ``system_prompt``,
    ``max_iterations`` (8), ``tool_timeout_seconds``, ``context_window_limit``, ``tool_names``,
    and tackroom's ``instructions``, ``mode``, ``context`` and ``task``. ``None`` keeps what the
    harness would use. ``Harness.run(prompt, config=...)`` takes it, so does the gateway's
    ``POST /v1/runs`` (``agent_config``) and a task graph's agent step."""

    @classmethod
    def from_yaml(cls, text: str | bytes) -> AgentConfig:
        """The config in ``text``: a mapping of its fields, or a ``tackroom.yaml`` document whose
        ``agent:`` section is read. ``UsageError`` says what is wrong, in one line."""
        try:
            _, raw = load_yaml(text)
        except YamlProblem as exc:
            raise UsageError(f"agent config: {exc}") from None
        if isinstance(raw, Mapping) and "agent" in raw:
            return cls._from_section(raw["agent"])
        return cls.parse(raw if raw is not None else {})

    @classmethod
    def load(cls, path: str | Path) -> AgentConfig:
        """:meth:`from_yaml` of a file (its errors name it)."""
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"agent config {path}: {exc.strerror or exc}") from None
        try:
            return cls.from_yaml(data)
        except UsageError as exc:
            raise UsageError(f"{path}: {exc}") from None

    @classmethod
    def parse(cls, value: Any) -> AgentConfig:
        """``value`` (a mapping, or a config of the contract's class) as a config, or a
        ``UsageError`` naming each field that is wrong."""
        if isinstance(value, cls):
            return value
        if isinstance(value, contract.AgentConfig):
            value = value.model_dump(exclude_unset=True)
        if not isinstance(value, Mapping):
            raise UsageError(
                f"agent config: expected a mapping of its fields, got {type(value).__name__}"
            )
        try:
            return cls.model_validate(dict(value))
        except ValidationError as exc:
            raise UsageError(f"agent config: {describe_validation_error(exc)}") from None

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> AgentConfig:
        """A ``tackroom.yaml``'s ``agent:`` section as a config. Its ``tools`` count only when
        the file sets them (the facade offers no built-in tool unasked)."""
        fields: dict[str, Any] = {
            "model_backend": settings.model,
            "max_iterations": settings.max_turns,
            "mode": settings.mode,
            "context": settings.context,
        }
        if "tools" in settings.model_fields_set:
            fields["tool_names"] = list(settings.tools)
        return cls.parse({k: v for k, v in fields.items() if v is not None})

    def to_yaml(self) -> str:
        """The fields set (and ``schema_version``) as YAML that :meth:`from_yaml` reads back
        equal; defaults left out stay defaults."""
        data = self.model_dump(mode="json", exclude_unset=True)
        data = {"schema_version": self.schema_version, **data}
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)

    @classmethod
    def _from_section(cls, section: Any) -> AgentConfig:
        try:
            settings = AgentSettings.model_validate(section or {})
        except ValidationError as exc:
            raise UsageError(
                f"agent config, agent section: {describe_validation_error(exc)}"
            ) from None
        return cls.from_settings(settings)


def as_agent_config(value: Any) -> AgentConfig | None:
    """What ``run(config=...)`` was given, as a config: an :class:`AgentConfig` (of this or the
    contract's class), a mapping of its fields, or ``None``."""
    if value is None:
        return None
    if isinstance(value, HarnessConfig):
        raise UsageError(
            "run(config=) takes an AgentConfig; a HarnessConfig goes to Harness(config=)"
        )
    return AgentConfig.parse(value)


def configured(
    request: RunStartRequest,
    config: AgentConfig,
    *,
    registered: Collection[str],
    context: ContextSettings | None,
) -> RunStartRequest:
    """``request`` with ``config`` filling it (:meth:`~AgentConfig.run_fields`). ``registered``:
    the names of the program's own tools — a bare ``tool_names`` entry must be one of them.
    ``context``: the settings a window limit alone is merged into when the request carries none
    (the harness's ``agent.context``, which the orchestrator would use)."""
    for name in config.tool_names or ():
        if contract.tool_pattern(name) != name and name not in registered:
            known = ", ".join(sorted(registered)) or "none"
            raise UsageError(
                f"tool_names: no tool named {name!r} is registered (registered: {known});"
                " name another worker's functions by id (fs::read, fs::*)"
            )
    return request.model_copy(update=config.run_fields(context=request.context or context))
