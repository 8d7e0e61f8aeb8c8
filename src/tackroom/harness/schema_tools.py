"""Tools as seed 003 writes them: a JSON schema (``input_schema``) and a ``handler`` that takes
the input as a dict and returns the result.

The schema is checked when the tool is defined (a schema that is not one, or does not describe an
object, is a ``UsageError`` then, not a failing run); each call's input is validated against it
before the handler runs, and a call that does not validate is refused with every reason, so the
model can correct its arguments instead of guessing (seed 003, 3.2). ``jsonschema`` is imported
only by programs that define such a tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tackroom.harness.errors import UsageError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["MAX_REASONS", "input_problems", "input_validator"]

MAX_REASONS = 5
"""Reasons a refused input lists at most (the first ones, by where they are in the input)."""


def input_validator(name: str, schema: Mapping[str, Any]) -> Validator:
    """The validator of ``schema``, or a ``UsageError`` saying why ``schema`` cannot be a tool's
    input schema."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, Mapping):
        raise UsageError(f"tool {name}: input_schema must be a JSON schema (a mapping)")
    if schema.get("type", "object") != "object":
        raise UsageError(
            f"tool {name}: input_schema must describe an object ({{'type': 'object', ...}}),"
            f" not {schema.get('type')!r}: a model passes its arguments by name"
        )
    schema = dict(schema)
    try:
        kind = validator_for(schema)
        kind.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "the top"
        raise UsageError(
            f"tool {name}: input_schema is invalid at {where}: {exc.message}"
        ) from None
    validator: Validator = kind(schema)
    return validator


def input_problems(validator: Validator, value: Any) -> str | None:
    """Why ``value`` does not validate (``arguments.city: 'city' is a required property; …``),
    or ``None`` when it does."""
    errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    reasons = [
        f"{'.'.join(['arguments', *(str(p) for p in error.absolute_path)])}: {error.message}"
        for error in errors[:MAX_REASONS]
    ]
    more = len(errors) - MAX_REASONS
    return "; ".join(reasons) + (f"; and {more} more" if more > 0 else "")
