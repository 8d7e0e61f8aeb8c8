"""Structured output: how a run asks the model for one JSON value valid against a schema, and how
an answer is judged.

The orchestrator judges a run's final answer against its ``output_schema`` inside the turn
(:func:`answer_problem`); the facade then types the validated JSON with pydantic
(:func:`json_text` finds it the same way). A model without a native JSON-schema mode is asked
by the paragraph :func:`answer_format` adds to the system prompt; an answer that does not
validate gets :func:`correction` as the next user message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jsonschema loads at the first judgement (it costs ~50 ms to import)
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = [
    "SchemaInvalid",
    "answer_format",
    "answer_problem",
    "check_schema",
    "correction",
    "json_text",
    "strict_compatible",
]

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)
_PROBLEM_CHARS = 600
_ERRORS_SHOWN = 3


class SchemaInvalid(ValueError):
    """An output schema that is not a JSON schema (the message says where)."""


def answer_format(schema: Mapping[str, Any], *, name: str) -> str:
    """The instruction to answer with a single JSON value valid against ``schema``."""
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return (
        f"When you give your final answer, reply with a single JSON value that validates"
        f" against this JSON schema ({name}), and nothing else — no prose, no"
        f" explanation:\n{text}"
    )


def correction(problem: str, *, name: str) -> str:
    """The corrective user message after an answer that did not validate."""
    return (
        f"Your answer did not validate against the {name} schema: {problem}. Reply"
        " again with only one JSON value that validates against the schema, nothing else."
    )


def json_text(text: str) -> str | None:
    """The JSON an answer holds: a fenced ```json block, the whole text when it is a JSON value,
    else from its first ``{``/``[`` to its last ``}``/``]`` (prose around it is dropped)."""
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


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise :class:`SchemaInvalid` unless ``schema`` is a JSON schema of its declared draft."""
    from jsonschema import SchemaError

    try:
        _validator(_key(schema))
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "the top"
        raise SchemaInvalid(f"not a JSON schema: {exc.message} (at {where})") from None
    except (RecursionError, TypeError, ValueError, LookupError) as exc:  # "$schema": [], …
        raise SchemaInvalid(f"not a JSON schema ({type(exc).__name__})") from None


def answer_problem(text: str, schema: Mapping[str, Any]) -> str | None:
    """What is wrong with ``text`` as an answer valid against ``schema`` (``None``: nothing),
    in words the model can act on."""
    candidate = json_text(text)
    if candidate is None:
        return "the answer holds no JSON value"
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError as exc:
        return f"the answer is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    from jsonschema.exceptions import best_match

    validator = _validator(_key(schema))
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = best_match(errors)
    shown = [first, *(e for e in errors if e is not first)][:_ERRORS_SHOWN]
    more = len(errors) - len(shown)
    text = "; ".join(_describe(error) for error in shown)
    if more > 0:
        text += f" (and {more} more)"
    return text[:_PROBLEM_CHARS]


def strict_compatible(schema: Any) -> bool:
    """Whether ``schema`` already meets OpenAI's strict mode: every object schema closes
    (``additionalProperties: false``) and requires all of its properties."""
    if isinstance(schema, list):
        return all(strict_compatible(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if not isinstance(properties, dict) or set(schema.get("required", [])) != set(properties):
            return False
    return all(strict_compatible(value) for value in schema.values())


def _describe(error: ValidationError) -> str:
    where = "/".join(str(part) for part in error.absolute_path)
    message = error.message if len(error.message) <= 200 else error.message[:199] + "…"
    return f"at {where}: {message}" if where else message


def _key(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=64)
def _validator(key: str) -> Validator:
    """A compiled validator per schema (its text): a run judges each answer with the same one."""
    from jsonschema import validators

    schema = json.loads(key)
    cls = validators.validator_for(schema)
    cls.check_schema(schema)
    validator: Validator = cls(schema)
    return validator


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
