"""The one nesting and size limit of JSON values, checked where a value enters the engine."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tackroom.engine import InvalidPayload
from tackroom.engine.jsonvalue import (
    MAX_CONTENT_DEPTH,
    MAX_DEPTH,
    MAX_RESULT_DEPTH,
    MAX_VALUE_BYTES,
    dumps,
    parse_json,
    to_json_value,
)
from tackroom.engine.ops import apply_ops


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


def test_the_limits_leave_room_for_envelopes() -> None:
    assert 64 <= MAX_DEPTH <= 128
    assert MAX_CONTENT_DEPTH <= MAX_DEPTH // 2
    # pydantic refuses to serialize past 255 levels: a result wrapping stored values must fit
    assert MAX_RESULT_DEPTH < 255


def test_a_value_at_the_limit_is_copied_one_level_more_is_refused() -> None:
    assert to_json_value(nested(MAX_DEPTH)) == nested(MAX_DEPTH)
    with pytest.raises(InvalidPayload, match=f"state value: nests deeper than {MAX_DEPTH} levels"):
        to_json_value(nested(MAX_DEPTH + 1), what="state value")


def test_a_value_nested_100000_deep_is_refused_without_recursing() -> None:
    with pytest.raises(InvalidPayload, match="nests deeper"):
        to_json_value(nested(100_000))


def test_the_depth_can_be_narrowed() -> None:
    assert to_json_value(nested(3), max_depth=3) == nested(3)
    with pytest.raises(InvalidPayload, match="deeper than 2 levels"):
        to_json_value(nested(3), max_depth=2)


@pytest.mark.parametrize(
    "value", ["\ud800", {"k": "a\udfffb"}, {"\ud83d": 1}, ["ok", ["\udc00"]]], ids=repr
)
def test_a_lone_surrogate_is_not_json_text(value: Any) -> None:
    with pytest.raises(InvalidPayload, match="lone surrogate"):
        to_json_value(value)


def test_text_outside_ascii_still_passes() -> None:
    value = {"名前": "Ada 😀 é", "list": ["ü"]}
    assert to_json_value(value) == value


def test_dumps_refuses_text_over_the_size_limit() -> None:
    assert dumps("x" * 100) == '"' + "x" * 100 + '"'
    with pytest.raises(InvalidPayload, match=f"longer than {MAX_VALUE_BYTES} bytes"):
        dumps("x" * MAX_VALUE_BYTES)
    # the limit counts UTF-8 bytes, not characters
    with pytest.raises(InvalidPayload, match="longer than"):
        dumps("é" * (MAX_VALUE_BYTES // 2))


def test_parse_json_checks_what_it_parses() -> None:
    assert parse_json('{"a": [1, "x"]}') == {"a": [1, "x"]}
    assert parse_json(b"[1]") == [1]
    deep = "[" * 100_000 + "]" * 100_000
    cases: dict[str, str | bytes] = {
        "invalid JSON": "{",
        "NaN is not a JSON value": "[NaN]",
        "Infinity is not a JSON value": "-Infinity",
        f"deeper than {MAX_DEPTH} levels": deep,
        "lone surrogate": '"\\ud800"',
        f"longer than {MAX_VALUE_BYTES} bytes": " " * (MAX_VALUE_BYTES + 1),
        "not UTF-8": b'"\xff"',
    }
    for reason, text in cases.items():
        with pytest.raises(InvalidPayload, match=re.escape(reason)):
            parse_json(text, what="the payload")
    with pytest.raises(InvalidPayload, match=r"^the payload: "):
        parse_json("{", what="the payload")
    with pytest.raises(InvalidPayload, match="deeper than 2 levels"):
        parse_json("[[[1]]]", max_depth=2)


def test_an_update_cannot_nest_a_value_past_the_limit() -> None:
    path = [f"p{i}" for i in range(10)]
    fits = apply_ops(None, [{"op": "set", "path": path, "value": nested(MAX_DEPTH - 10)}])
    assert fits is not None
    for kind in ("set", "merge", "append"):
        value = nested(MAX_DEPTH - 9) if kind != "merge" else {"m": nested(MAX_DEPTH - 10)}
        with pytest.raises(InvalidPayload, match="nests deeper"):
            apply_ops(None, [{"op": kind, "path": path, "value": value}])
    with pytest.raises(InvalidPayload, match="nests deeper"):
        apply_ops(None, [{"op": "set", "path": ["p"] * (MAX_DEPTH + 1), "value": 1}])
