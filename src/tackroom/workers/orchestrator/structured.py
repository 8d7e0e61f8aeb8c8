"""Structured output inside the turn: a run's final answer judged against its output schema.

A run started with ``output_schema`` keeps it in its record (:class:`OutputSpec`). Each model
call asks for it the best way the model allows (:mod:`.modelcall`): the provider's native
JSON-schema mode where the catalog marks the model ``structured_output``
(:func:`native_format`), else the schema in the system prompt (:func:`prompted`). A final answer
(no tool call) is judged by the pure :func:`judge`: valid, the run goes on as any run does;
invalid, the transition stores the answer and a corrective user message and goes back to
``assistant_streaming`` — the corrective call is a step of the durable turn, committed, counted
in usage, and made once even across a crash; after ``retries`` corrections the run stops with
``stop_reason`` and error kind ``output_invalid``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.messages import AssistantMessage, UserMessage, text_of
from tackroom.contracts.provider import OutputFormat
from tackroom.contracts.turn import RunStartRequest
from tackroom.engine.errors import FunctionError
from tackroom.kit.output import (
    SchemaInvalid,
    answer_format,
    answer_problem,
    check_schema,
    correction,
    strict_compatible,
)

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "OUTPUT_INVALID",
    "Correct",
    "GiveUp",
    "OutputSpec",
    "judge",
    "native_format",
    "output_spec",
    "prompted",
]

OUTPUT_INVALID = "output_invalid"
"""The ``stop_reason`` and error kind of a run whose answer never validated."""

DEFAULT_OUTPUT_RETRIES = 2
"""Corrective model calls a run gets by default: the first correction, which quotes the
validation error, fixes nearly every slip (a missing field, a wrong type, prose around the
JSON); a second covers a model that half-fixes it. A model still wrong after that is stuck, and
a third call would spend tokens to fail the same way — the seed's advice, one correction, plus
one."""

_NAME = re.compile(r"[^A-Za-z0-9_-]")


class OutputSpec(BaseModel):
    """The answer a run must give (kept in its turn record)."""

    model_config = ConfigDict(extra="forbid")

    json_schema: dict[str, Any]
    name: str = "output"
    retries: int = Field(default=DEFAULT_OUTPUT_RETRIES, ge=0, le=10)
    """Corrective model calls at most."""


@dataclass(frozen=True, slots=True)
class Correct:
    """Ask again: ``message`` (the corrective user message) says what was wrong."""

    message: UserMessage
    problem: str


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The corrections are spent: the run stops with ``reason``."""

    reason: str


def output_spec(request: RunStartRequest, *, default_retries: int) -> OutputSpec | None:
    """The request's output schema as the record keeps it; ``invalid_request`` when it is not a
    JSON schema (a run that could never end well is not started)."""
    if request.output_schema is None:
        return None
    try:
        check_schema(request.output_schema)
    except SchemaInvalid as exc:
        raise FunctionError("invalid_request", f"output_schema is {exc}") from None
    retries = request.output_retries
    return OutputSpec(
        json_schema=request.output_schema,
        name=request.output_name or "output",
        retries=default_retries if retries is None else retries,
    )


def judge(spec: OutputSpec, message: AssistantMessage, *, used: int) -> Correct | GiveUp | None:
    """``None`` when the final answer ``message`` validates; else another try (``used``
    corrections were spent so far) or the end."""
    problem = answer_problem(text_of(message.content), spec.json_schema)
    if problem is None:
        return None
    if used >= spec.retries:
        return GiveUp(
            f"the answer did not validate against {spec.name} after {used} corrective"
            f" retries: {problem}"
        )
    return Correct(UserMessage.text(correction(problem, name=spec.name)), problem)


def native_format(spec: OutputSpec) -> OutputFormat:
    """The provider's JSON-schema mode for ``spec`` (strict only where the schema allows it)."""
    name = _NAME.sub("_", spec.name)[:64] or "output"
    return OutputFormat(
        name=name, json_schema=spec.json_schema, strict=strict_compatible(spec.json_schema)
    )


def prompted(spec: OutputSpec, system_prompt: str) -> str:
    """``system_prompt`` with the schema and the rule to answer with it alone."""
    asked = answer_format(spec.json_schema, name=spec.name)
    return f"{system_prompt}\n\n{asked}" if system_prompt else asked
