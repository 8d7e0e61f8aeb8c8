"""Structured output: the final answer validated against ``output_type``.

The type's JSON schema travels with the run (``RunStartRequest.output_schema``): the
orchestrator asks the model for it (natively where the catalog says the model can), judges the
final answer inside the turn and corrects it with further model calls of the same durable turn,
at most ``retries`` of them (``RunResult.output_retries`` counts them, their usage is in the
run's). Here the validated JSON is typed with pydantic (:meth:`OutputSchema.parse`); a run that
still had no valid answer (``stop_reason == "output_invalid"``), or whose answer the JSON schema
let through but the type refuses, raises :class:`OutputInvalid` with the result attached.
"""

from __future__ import annotations

import re
from typing import Any, Generic, TypeVar

from pydantic import PydanticSchemaGenerationError, PydanticUserError, TypeAdapter, ValidationError

from tackroom.harness.result import RunResult
from tackroom.kit.output import json_text
from tackroom.runtime.errors import HarnessError
from tackroom.runtime.typed import describe_validation_error

__all__ = ["OUTPUT_INVALID", "OutputInvalid", "OutputSchema", "OutputTypeUnsupported", "typed"]

T = TypeVar("T")

OUTPUT_INVALID = "output_invalid"
"""The stop reason of a run whose answer never validated (the orchestrator's)."""

_NAME = re.compile(r"[^A-Za-z0-9_-]")


class OutputInvalid(HarnessError):
    """The model's final answer did not validate against ``output_type``, retries included."""

    def __init__(self, message: str, *, result: Any) -> None:
        super().__init__(message)
        self.result = result


class OutputTypeUnsupported(HarnessError):
    """``output_type`` is not a type pydantic can validate and describe."""


class OutputSchema(Generic[T]):
    """The JSON schema and the parsing of one ``output_type``."""

    def __init__(self, output_type: type[T]) -> None:
        self.type = output_type
        try:
            self._adapter: TypeAdapter[T] = TypeAdapter(output_type)
            self.schema = self._adapter.json_schema()
        except (PydanticUserError, PydanticSchemaGenerationError) as exc:
            raise OutputTypeUnsupported(f"output_type {output_type!r}: {exc.message}") from None
        name = getattr(output_type, "__name__", "output")
        self.name = _NAME.sub("_", name)[:64] or "output"

    def parse(self, text: str) -> T:
        """The validated value; raises ``ValueError`` whose message says what is wrong."""
        candidate = json_text(text)
        if candidate is None:
            raise ValueError("the answer holds no JSON value")
        try:
            return self._adapter.validate_json(candidate)
        except ValidationError as exc:
            if any(error["type"] == "json_invalid" for error in exc.errors()):
                raise ValueError(
                    f"the answer is not valid JSON: {exc.errors()[0]['msg']}"
                ) from None
            raise ValueError(describe_validation_error(exc)) from None


def typed(result: RunResult[Any], schema: OutputSchema[Any]) -> RunResult[Any]:
    """``result`` with ``output`` the typed answer; a run that ended for another reason (an
    error, an approval awaited) is returned as it is."""
    if result.stop_reason == OUTPUT_INVALID:
        raise OutputInvalid(result.error or "the answer did not validate", result=result)
    if not result.ok:
        return result
    try:
        result.output = schema.parse(result.text)
    except ValueError as exc:
        raise OutputInvalid(
            f"the answer did not validate against {schema.name}: {exc}", result=result
        ) from None
    return result
