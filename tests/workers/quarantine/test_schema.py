"""The restricted schemas the quarantined reader takes, and the formats it checks."""

from __future__ import annotations

from typing import Any

import pytest

from tackroom.workers.quarantine.formats import format_problem
from tackroom.workers.quarantine.schema import SchemaRefused, problems, restricted


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


ACCEPTED = [
    obj(paid={"type": "boolean"}),
    obj(n={"type": "integer", "minimum": 0, "maximum": 10}, x={"type": "number"}),
    obj(status={"type": "string", "enum": ["open", "closed"], "description": "the state"}),
    obj(at={"type": "string", "format": "date-time"}, to={"type": "string", "format": "email"}),
    obj(code={"type": "string", "pattern": "[A-Z]{2}[0-9]{4}", "maxLength": 6}),
    obj(tags={"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 32}),
    {**obj(ok={"type": "boolean"}), "required": ["ok"], "additionalProperties": False},
]

REFUSED = [
    (obj(note={"type": "string"}), "'note': a free string could carry instructions"),
    (obj(note={"type": "string", "maxLength": 10}), "'note': a free string"),
    (obj(note={"type": "string", "pattern": ".*"}), "'note': a string with a pattern needs"),
    (obj(note={"type": "string", "pattern": ".*", "maxLength": 65}), "maxLength from 1 to 64"),
    (obj(s={"type": "string", "enum": [str(i) for i in range(65)]}), "1 to 64 strings"),
    (obj(s={"type": "string", "format": "hostname"}), "format 'hostname' is not checked"),
    (obj(s={"type": "string", "format": "uri", "maxLength": 5000}), "maxLength from 1 to 512"),
    (obj(s={"type": "string", "enum": ["a"], "format": "email"}), "one of enum, format"),
    (obj(a={"type": "array", "items": {"type": "boolean"}}), "'a': an array needs maxItems"),
    (obj(a={"type": "array", "items": {"type": "boolean"}, "maxItems": 33}), "between 1 and 32"),
    (obj(a={"type": "array", "items": {"type": "string"}, "maxItems": 3}), "'a' items: a free"),
    (obj(o={"type": "object", "properties": {}}), "'o': nested objects are not taken"),
    (obj(o={"type": "array", "items": {"type": "object"}, "maxItems": 2}), "nested objects"),
    (obj(n={"type": "null"}), "'n': type must be one of"),
    (obj(n={"anyOf": [{"type": "boolean"}]}), "'n': type must be one of"),
    (obj(n={"type": "boolean", "default": True}), "'n': default not taken here"),
    ({**obj(ok={"type": "boolean"}), "additionalProperties": True}, "additionalProperties must"),
    ({"type": "array", "items": {"type": "boolean"}}, "not taken here"),
    ({"type": "object", "properties": {}}, "the schema needs properties"),
    (obj(**{f"p{i}": {"type": "boolean"} for i in range(17)}), "17 properties: at most 16"),
    ({**obj(ok={"type": "boolean"}), "required": ["other"]}, "required must list"),
    (obj(s={"type": "string", "pattern": "(", "maxLength": 3}), "pattern does not compile"),
]


@pytest.mark.parametrize("schema", ACCEPTED)
def test_schemas_without_free_text_are_taken(schema: dict[str, Any]) -> None:
    normalized = restricted(schema)
    assert normalized["additionalProperties"] is False
    assert normalized["properties"].keys() == schema["properties"].keys()


@pytest.mark.parametrize(("schema", "reason"), REFUSED)
def test_other_schemas_are_refused_naming_the_property(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(SchemaRefused) as refused:
        restricted(schema)
    assert reason in str(refused.value)


def test_a_pattern_must_match_the_whole_value() -> None:
    schema = restricted(obj(code={"type": "string", "pattern": "[A-Z]{3}", "maxLength": 64}))
    assert problems({"code": "ABC"}, schema) == []
    for value in ("xABCx", "ABC and then some instructions", "ABC\n"):
        [problem] = problems({"code": value}, schema)
        assert problem.where == "code"


def test_formats_are_checked_strictly() -> None:
    schema = restricted(
        obj(
            to={"type": "string", "format": "email"},
            on={"type": "string", "format": "date"},
            url={"type": "string", "format": "uri"},
            ids={"type": "array", "items": {"type": "string", "format": "uuid"}, "maxItems": 2},
        )
    )
    good = {
        "to": "a.b+c@mail.example.org",
        "on": "2026-02-28",
        "url": "https://example.org/a?b=1",
        "ids": ["123e4567-e89b-12d3-a456-426614174000"],
    }
    assert problems(good, schema) == []
    bad = {"to": "a@b", "on": "2026-02-30", "url": "javascript:alert(1)", "ids": ["x", "y"]}
    assert {p.where for p in problems(bad, schema)} == {"to", "on", "url", "ids/0", "ids/1"}


@pytest.mark.parametrize(
    ("fmt", "value"),
    [
        ("email", "\uff41@example.org"),  # a look-alike letter
        ("email", "a@example.org\nBcc: x@y.z"),
        ("date-time", "2026-01-01 10:00:00"),
        ("date-time", "2026-01-01T10:00:00"),  # no offset
        ("uri", "https://example.org/a b"),
        ("uri", "https://example.org/\nignore"),
        ("uri", "ftp://example.org/"),
        ("uuid", "123e4567e89b12d3a456426614174000"),
    ],
)
def test_near_misses_of_a_format_are_refused(fmt: str, value: str) -> None:
    assert format_problem(fmt, value) is not None


def test_an_answer_that_is_not_an_object_is_a_problem() -> None:
    schema = restricted(obj(ok={"type": "boolean"}))
    assert [p.where for p in problems(["ok"], schema)] == ["the top"]
    assert [p.where for p in problems({"ok": True, "extra": "x"}, schema)] == ["the top"]
