"""The restricted schemas ``quarantine::extract`` takes, and how an answer is judged against one.

:func:`restricted` refuses a schema that leaves room for free text (naming the property and what
to write instead) and returns it normalized: closed (``additionalProperties: false``), every
``pattern`` anchored so it matches the whole value, every formatted string bounded. That
normalized schema is what the reader is shown and what :func:`problems` judges with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from tackroom.contracts.quarantine import (
    FORMATS,
    MAX_ARRAY_ITEMS,
    MAX_ENUM_VALUES,
    MAX_PATTERN_LENGTH,
    MAX_PROPERTIES,
)
from tackroom.workers.quarantine.formats import FORMAT_LENGTH, format_problem

__all__ = ["Problem", "SchemaRefused", "problems", "restricted"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_NOTES = ("title", "description")
_MAX_NOTE = 300
_MAX_ENUM_CHARS = 200
_MAX_REGEX = 256
_COMMON = {"type", *_NOTES}
_ALLOWED: dict[str, set[str]] = {
    "boolean": _COMMON,
    "integer": {*_COMMON, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
    "number": {*_COMMON, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
    "string": {*_COMMON, "enum", "format", "pattern", "minLength", "maxLength"},
    "array": {*_COMMON, "items", "minItems", "maxItems", "uniqueItems"},
}
_TOP = {"type", "properties", "required", "additionalProperties", *_NOTES}
_FREE_STRING = (
    "a free string could carry instructions: give it an enum (at most"
    f" {MAX_ENUM_VALUES} values), a format ({', '.join(FORMATS)}), or a pattern with"
    f" maxLength <= {MAX_PATTERN_LENGTH}"
)


@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong with an answer: ``where`` (a property, ``the top``) may be told to anyone;
    ``detail`` quotes the answer, so only the reader that wrote it reads it."""

    where: str
    detail: str


class SchemaRefused(ValueError):
    """The schema is not one the reader takes; the message names where and what to do."""


def restricted(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` normalized, or :class:`SchemaRefused`."""
    _keys(schema, _TOP, "the schema")
    if schema.get("type") != "object":
        raise SchemaRefused('the schema must be {"type": "object", "properties": {...}}')
    if schema.get("additionalProperties", False) is not False:
        raise SchemaRefused("additionalProperties must be false (or absent): name every property")
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        raise SchemaRefused("the schema needs properties: an object of one property or more")
    if len(properties) > MAX_PROPERTIES:
        raise SchemaRefused(
            f"{len(properties)} properties: at most {MAX_PROPERTIES}; extract in several calls"
        )
    normalized: dict[str, Any] = {}
    for name, value in properties.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise SchemaRefused(f"property {name!r}: name it with letters, digits and _")
        normalized[name] = _property(name, value)
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(r in properties for r in required):
        raise SchemaRefused("required must list names of the schema's properties")
    out: dict[str, Any] = {
        "type": "object",
        "properties": normalized,
        "additionalProperties": False,
    }
    if required:
        out["required"] = list(dict.fromkeys(required))
    return {**_notes(schema, "the schema"), **out}


def problems(value: Any, schema: Mapping[str, Any]) -> list[Problem]:
    """What is wrong with ``value`` against a :func:`restricted` schema (``[]``: nothing): the
    JSON-schema checks, then each string's format or pattern (matched against the whole value:
    ``$`` would let a trailing newline through)."""
    from jsonschema import Draft202012Validator

    found = [
        Problem("/".join(map(str, error.absolute_path)) or "the top", error.message[:200])
        for error in Draft202012Validator(dict(schema)).iter_errors(value)
    ]
    if not isinstance(value, dict):
        return found
    flagged = {problem.where for problem in found}
    for name, item in value.items():
        spec = schema["properties"].get(name)
        if spec is None:
            continue
        many = spec["type"] == "array"
        inner = spec["items"] if many else spec
        for index, text in enumerate(item if many and isinstance(item, list) else [item]):
            where = f"{name}/{index}" if many else name
            if where in flagged or not isinstance(text, str):
                continue
            problem = _string_problem(inner, text)
            if problem is not None:
                found.append(Problem(where, problem))
    return found


def _string_problem(spec: Mapping[str, Any], value: Any) -> str | None:
    if "format" in spec:
        return format_problem(spec["format"], value)
    if "pattern" in spec and re.fullmatch(spec["pattern"], value) is None:
        return f"{value!r} does not match {spec['pattern']!r}"
    return None


def _property(name: str, spec: Any) -> dict[str, Any]:
    where = f"property {name!r}"
    if not isinstance(spec, Mapping):
        raise SchemaRefused(f"{where}: must be a schema object")
    if spec.get("type") == "array":
        _keys(spec, _ALLOWED["array"], where)
        limit = spec.get("maxItems")
        if not _is_int(limit) or not 0 < limit <= MAX_ARRAY_ITEMS:
            raise SchemaRefused(f"{where}: an array needs maxItems between 1 and {MAX_ARRAY_ITEMS}")
        low = spec.get("minItems", 0)
        if not _is_int(low) or not 0 <= low <= limit:
            raise SchemaRefused(f"{where}: minItems must be an integer from 0 to maxItems")
        out = {k: v for k, v in spec.items() if k in ("minItems", "maxItems")}
        if "uniqueItems" in spec:
            out["uniqueItems"] = bool(spec["uniqueItems"])
        items = _scalar(f"{where} items", spec.get("items"))
        return {**_notes(spec, where), "type": "array", "items": items, **out}
    return _scalar(where, spec)


def _scalar(where: str, spec: Any) -> dict[str, Any]:
    if not isinstance(spec, Mapping):
        raise SchemaRefused(f"{where}: must be a schema object")
    kind = spec.get("type")
    if kind in ("object", "array"):
        raise SchemaRefused(
            f"{where}: nested {kind}s are not taken; flatten it into top-level properties"
            " (arrays only of booleans, numbers and constrained strings)"
        )
    if not isinstance(kind, str) or kind not in _ALLOWED or kind == "array":
        raise SchemaRefused(
            f"{where}: type must be one of boolean, integer, number, string or array"
        )
    _keys(spec, _ALLOWED[kind], where)
    notes = _notes(spec, where)
    if kind == "boolean":
        return {**notes, "type": kind}
    if kind in ("integer", "number"):
        return {**notes, **_bounds(where, spec), "type": kind}
    return {**notes, **_string(where, spec), "type": "string"}


def _bounds(where: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
    out = {key: spec[key] for key in keys if key in spec}
    for key, bound in out.items():
        if isinstance(bound, bool) or not isinstance(bound, (int, float)):
            raise SchemaRefused(f"{where}: {key} must be a number")
    return out


def _string(where: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    shapes = [key for key in ("enum", "format", "pattern") if key in spec]
    if not shapes:
        raise SchemaRefused(f"{where}: {_FREE_STRING}")
    if len(shapes) > 1:
        raise SchemaRefused(f"{where}: give one of enum, format or pattern, not {shapes}")
    low = spec.get("minLength", 0)
    if not _is_int(low) or low < 0:
        raise SchemaRefused(f"{where}: minLength must be a non-negative integer")
    out: dict[str, Any] = {"minLength": low} if low else {}
    if "enum" in spec:
        return {**out, "enum": _enum(where, spec["enum"])}
    if "format" in spec:
        fmt = spec["format"]
        if fmt not in FORMATS:
            raise SchemaRefused(
                f"{where}: format {fmt!r} is not checked; use one of {', '.join(FORMATS)},"
                " or a pattern"
            )
        ceiling = FORMAT_LENGTH[fmt]
        limit = spec.get("maxLength", ceiling)
        if not _is_int(limit) or not 0 < limit <= ceiling:
            raise SchemaRefused(f"{where}: a {fmt} string takes maxLength from 1 to {ceiling}")
        return {**out, "format": fmt, "maxLength": limit}
    limit = spec.get("maxLength")
    if not _is_int(limit) or not 0 < limit <= MAX_PATTERN_LENGTH:
        raise SchemaRefused(
            f"{where}: a string with a pattern needs maxLength from 1 to {MAX_PATTERN_LENGTH}"
        )
    return {**out, "pattern": _anchored(where, spec["pattern"]), "maxLength": limit}


def _enum(where: str, values: Any) -> list[str]:
    if not isinstance(values, list) or not 0 < len(values) <= MAX_ENUM_VALUES:
        raise SchemaRefused(f"{where}: enum must list 1 to {MAX_ENUM_VALUES} strings")
    if not all(isinstance(v, str) and len(v) <= _MAX_ENUM_CHARS for v in values):
        raise SchemaRefused(
            f"{where}: enum values must be strings of at most {_MAX_ENUM_CHARS} characters"
        )
    return list(dict.fromkeys(values))


def _anchored(where: str, pattern: Any) -> str:
    """``pattern`` made to match a whole value (JSON schema's ``pattern`` searches)."""
    if not isinstance(pattern, str) or not pattern or len(pattern) > _MAX_REGEX:
        raise SchemaRefused(f"{where}: pattern must be a regular expression of 1 to 256 characters")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise SchemaRefused(f"{where}: pattern does not compile: {exc}") from None
    return f"^(?:{pattern})$"


def _notes(spec: Mapping[str, Any], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in _NOTES:
        if key not in spec:
            continue
        note = spec[key]
        if not isinstance(note, str) or len(note) > _MAX_NOTE:
            raise SchemaRefused(f"{where}: {key} must be text of at most {_MAX_NOTE} characters")
        out[key] = note
    return out


def _keys(spec: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(str(key) for key in spec if key not in allowed)
    if extra:
        raise SchemaRefused(
            f"{where}: {', '.join(extra)} not taken here (allowed: {', '.join(sorted(allowed))})"
        )


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
