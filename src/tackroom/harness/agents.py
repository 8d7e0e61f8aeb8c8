"""Agent definitions from the facade's options (``Harness.agent``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from pydantic import ValidationError

from tackroom.contracts.agents import AgentDefinition
from tackroom.harness.errors import UsageError
from tackroom.harness.output import OutputSchema
from tackroom.runtime.typed import describe_validation_error

__all__ = ["AgentOptions", "define_agent"]


class AgentOptions(TypedDict, total=False):
    """``Harness.agent(name, **options)``."""

    instructions: str
    model: str | None
    tools: Sequence[str]
    output_type: Any
    description: str
    max_turns: int
    budget_usd: float | None


def define_agent(
    name: str,
    *,
    instructions: str = "",
    model: str | None = None,
    tools: Sequence[str] = (),
    output_type: Any = None,
    description: str = "",
    max_turns: int = 8,
    budget_usd: float | None = None,
) -> AgentDefinition:
    """The definition, or a ``UsageError`` saying which option is wrong; ``output_type`` becomes
    the JSON schema the agent answers in."""
    schema = None if output_type is None else OutputSchema(output_type).schema
    try:
        return AgentDefinition(
            name=name,
            instructions=instructions,
            model=model,
            tools=list(tools),
            output_schema=schema,
            description=description,
            max_turns=max_turns,
            budget_usd=budget_usd,
        )
    except ValidationError as exc:
        raise UsageError(f"agent {name!r}: {describe_validation_error(exc)}") from None
