"""One agent's configuration as data: :class:`AgentConfig` (seed 003's name and fields).

The same object configures a run wherever one starts: ``Harness.run(prompt, config=...)``, the
gateway's ``POST /v1/runs`` (``agent_config``) and a task graph's agent step
(``agent.agent_config``). Each of them builds a ``run::start`` request and lets the config fill
it (:meth:`AgentConfig.run_fields`), so a config means the same thing on every path:

=========================  ==================================================================
field                      carried by ``run::start`` as
=========================  ==================================================================
``model_backend``          ``provider``, ``model`` and ``fallbacks`` (``a:x -> b:y`` is a chain)
``system_prompt``          ``system_prompt`` (replaces the assembled prompt verbatim)
``instructions``           ``instructions`` (appended to the system prompt)
``max_iterations``         ``max_turns`` (model calls at most)
``context_window_limit``   ``context.context_window_limit``
``context``                ``context`` (reserve, keep_last, compact, recall)
``tool_names``             ``tools`` (a bare name ``x`` is the program's tool ``tool::x``)
``mode``, ``task``         ``mode``, ``task``
``tool_timeout_seconds``   ``tool_timeout`` (a tool's own shorter limit still holds)
=========================  ==================================================================

YAML goes through ``tackroom.harness.agentconfig.AgentConfig`` (this model plus
``from_yaml``/``to_yaml``): a contract reads no files.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tackroom.contracts.context import ContextSettings
from tackroom.contracts.turn import TASK_PATTERN, Mode, ModelRef, parse_model_chain

__all__ = [
    "SCHEMA_VERSION",
    "TOOL_PREFIX",
    "AgentConfig",
    "tool_pattern",
]

SCHEMA_VERSION = 1

TOOL_PREFIX = "tool::"
"""Function ids of the tools a program registers in Python (``Harness.register_tool``)."""

_BARE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def tool_pattern(name: str) -> str:
    """A ``tool_names`` entry as a function-id pattern: a bare tool name (``get_weather``) is the
    program's tool ``tool::get_weather``; a function id or glob (``fs::read``, ``fs::*``) stays."""
    return TOOL_PREFIX + name if _BARE_NAME.match(name) else name


class AgentConfig(BaseModel):
    """What an agent is and how far a run of it may go (seed 003's ``AgentConfig``).

    ``None`` means "what the harness (or the gateway, or the graph) would use anyway"."""

    # Built at first use: the gateway's and the task graphs' contracts import it, few use it.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    schema_version: int = SCHEMA_VERSION
    model_backend: str | None = Field(
        default=None,
        max_length=500,
        description="PROVIDER:MODEL (openai:gpt-5-mini, scripted:demo), or a chain tried in"
        " order on transient failures (a:x -> b:y); None: the harness's model",
    )
    system_prompt: str | None = Field(
        default=None,
        max_length=200_000,
        description="the system prompt, verbatim, in place of the one tackroom assembles (mode,"
        " identity, working directory, project instructions, skills); None: the assembled one",
    )
    instructions: str | None = Field(
        default=None,
        max_length=200_000,
        description="appended to the system prompt (assembled or given)",
    )
    max_iterations: int = Field(
        default=8, ge=1, le=1000, description="model calls at most in one run"
    )
    tool_timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        le=86_400,
        description="each tool call's limit; None: the tool's own timeout, else the"
        " orchestrator's call_timeout",
    )
    context_window_limit: int | None = Field(
        default=None,
        ge=256,
        description="tokens of context at most, below the model's own window; None: the model's",
    )
    tool_names: list[str] | None = Field(
        default=None,
        max_length=256,
        description="the tools this agent is offered: tool names of the program's tools, or"
        " function ids and globs (fs::read, fs::*); None: the harness's tools",
    )
    mode: Mode | None = Field(default=None, description="agent, ask or plan; None: the harness's")
    context: ContextSettings | None = Field(
        default=None, description="the rest of the context budget (reserve, keep_last, recall)"
    )
    task: str | None = Field(
        default=None,
        pattern=TASK_PATTERN,
        description="a task tag: a route of that name chooses the model chain",
    )

    @field_validator("model_backend")
    @classmethod
    def _a_model_chain(cls, value: str | None) -> str | None:
        if value is not None:
            parse_model_chain(value)  # ValueError says what is wrong
        return value

    @field_validator("tool_names")
    @classmethod
    def _names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or ():
            if not name.strip() or len(name) > 200:
                raise ValueError(f"tool name {name!r} must be 1-200 characters")
        return value

    @model_validator(mode="after")
    def _one_window_limit(self) -> AgentConfig:
        inner = None if self.context is None else self.context.context_window_limit
        if None not in (inner, self.context_window_limit) and inner != self.context_window_limit:
            raise ValueError(
                f"context_window_limit is {self.context_window_limit} but"
                f" context.context_window_limit is {inner}: give it once"
            )
        return self

    # -- onto run::start ---------------------------------------------------------------------
    def models(self) -> list[ModelRef] | None:
        """``model_backend`` as the model and its fallbacks, or ``None`` when it is unset."""
        return None if self.model_backend is None else parse_model_chain(self.model_backend)

    def tool_patterns(self) -> list[str] | None:
        """``tool_names`` as function-id patterns (:func:`tool_pattern`), or ``None``."""
        if self.tool_names is None:
            return None
        return list(dict.fromkeys(tool_pattern(name) for name in self.tool_names))

    def context_settings(self, base: ContextSettings | None) -> ContextSettings | None:
        """The context a run gets: ``context`` (else ``base``, the caller's own) with
        ``context_window_limit`` over it; ``base`` unchanged when the config says nothing."""
        settings = self.context if self.context is not None else base
        if self.context_window_limit is None:
            return settings
        update = {"context_window_limit": self.context_window_limit}
        return (settings or ContextSettings()).model_copy(update=update)

    def run_fields(self, *, context: ContextSettings | None = None) -> dict[str, Any]:
        """The ``RunStartRequest`` fields this config sets, by name (``context``: the caller's
        own context settings, which a window limit alone is merged into). A field left ``None``
        is absent, so the caller's value stands."""
        fields: dict[str, Any] = {"max_turns": self.max_iterations}
        chain = self.models()
        if chain is not None:
            first, *fallbacks = chain
            fields.update(provider=first.provider, model=first.model, fallbacks=fallbacks)
        patterns = self.tool_patterns()
        if patterns is not None:
            fields["tools"] = patterns
        settings = self.context_settings(context)
        if settings is not context:
            fields["context"] = settings
        for name in ("system_prompt", "instructions", "mode", "task"):
            value = getattr(self, name)
            if value is not None:
                fields[name] = value
        if self.tool_timeout_seconds is not None:
            fields["tool_timeout"] = self.tool_timeout_seconds
        return fields
