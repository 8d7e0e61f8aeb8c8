"""Structured output: the final answer validated against ``output_type``.

The run's instructions gain the type's JSON schema and the rule to answer with one JSON value
only. The final text is parsed (a fenced ```json block, or the outermost object/array, is
taken) and validated; when it does not validate the harness sends one corrective message on the
same session — the validation errors, and the schema again — and tries again, at most
``retries`` times. The count is reported in ``RunResult.output_retries``; when the answer still
does not validate :class:`OutputInvalid` is raised with the last result attached.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from pydantic import PydanticSchemaGenerationError, PydanticUserError, TypeAdapter, ValidationError

from tackroom.harness.result import RunResult
from tackroom.kit.output import answer_format
from tackroom.runtime.errors import HarnessError
from tackroom.runtime.typed import describe_validation_error

__all__ = ["OutputInvalid", "OutputSchema", "OutputTypeUnsupported", "validated"]

T = TypeVar("T")

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


class OutputInvalid(HarnessError):
    """The model's final answer did not validate against ``output_type``, retries included."""

    def __init__(self, message: str, *, result: Any) -> None:
        super().__init__(message)
        self.result = result


class OutputTypeUnsupported(HarnessError):
    """``output_type`` is not a type pydantic can validate and describe."""


class OutputSchema(Generic[T]):
    """Instructions, parsing and the corrective message for one ``output_type``."""

    def __init__(self, output_type: type[T]) -> None:
        self.type = output_type
        try:
            self._adapter: TypeAdapter[T] = TypeAdapter(output_type)
            self.schema = self._adapter.json_schema()
        except (PydanticUserError, PydanticSchemaGenerationError) as exc:
            raise OutputTypeUnsupported(f"output_type {output_type!r}: {exc.message}") from None
        self.name = getattr(output_type, "__name__", "output")

    def instructions(self) -> str:
        return answer_format(self.schema, name=self.name)

    def parse(self, text: str) -> T:
        """The validated value; raises ``ValueError`` whose message says what is wrong."""
        candidate = _json_text(text)
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

    def correction(self, problem: str) -> str:
        return (
            f"Your answer did not validate against the {self.name} schema: {problem}. Reply"
            " again with only one JSON value that validates against the schema, nothing else."
        )


def _json_text(text: str) -> str | None:
    stripped = text.strip()
    if not stripped:
        return None
    fenced = _FENCE.search(stripped)
    if fenced is not None:
        return fenced.group(1).strip()
    if stripped[0] in '{["' or stripped in ("true", "false", "null") or _is_number(stripped):
        return stripped
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if not starts:
        return stripped
    start = min(starts)
    end = max(stripped.rfind("}"), stripped.rfind("]"))
    return stripped[start : end + 1] if end > start else stripped


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


async def validated(
    result: RunResult[Any],
    schema: OutputSchema[Any],
    *,
    retries: int,
    ask_again: Callable[[str], Awaitable[RunResult[Any]]],
) -> RunResult[Any]:
    """``result`` with ``output`` validated; ``ask_again(correction)`` runs the corrective turn
    on the same session, at most ``retries`` times."""
    spent = 0
    while True:
        try:
            value = schema.parse(result.text)
        except ValueError as exc:
            if spent >= retries:
                raise OutputInvalid(
                    f"the answer did not validate against {schema.name} after {spent}"
                    f" corrective retries: {exc}",
                    result=result,
                ) from None
            spent += 1
            previous = result
            result = await ask_again(schema.correction(str(exc)))
            result.messages = [*previous.messages, *result.messages]
            result.usage = previous.usage + result.usage
            if not result.ok:
                result.output_retries = spent
                return result
            continue
        result.output = value
        result.output_retries = spent
        return result
