"""The pure update ops behind ``Engine.update_state``."""

from __future__ import annotations

from typing import Any

import pytest

from tackroom.engine import InvalidPayload, InvalidUpdate, UpdateOp
from tackroom.engine.ops import apply_ops


def test_ops_build_nested_values_from_nothing() -> None:
    ops: list[UpdateOp] = [
        {"op": "increment", "path": ["usage", "tokens"], "value": 5},
        {"op": "append", "path": ["log"], "value": "a"},
        {"op": "merge", "value": {"status": "open"}},
        {"op": "set", "path": ["usage", "model"], "value": "m1"},
    ]
    assert apply_ops(None, ops) == {
        "usage": {"tokens": 5, "model": "m1"},
        "log": ["a"],
        "status": "open",
    }


def test_ops_do_not_modify_their_input() -> None:
    original: dict[str, Any] = {"log": [1], "n": 1}
    result = apply_ops(original, [{"op": "append", "path": ["log"], "value": 2}])
    assert original == {"log": [1], "n": 1}
    assert result == {"log": [1, 2], "n": 1}


def test_remove_field_and_root() -> None:
    assert apply_ops({"a": 1, "b": 2}, [{"op": "remove", "path": ["a"]}]) == {"b": 2}
    assert apply_ops({"a": 1}, [{"op": "remove"}]) is None


@pytest.mark.parametrize(
    ("value", "op", "reason"),
    [
        ({"n": "x"}, {"op": "increment", "path": ["n"], "value": 1}, "not a number"),
        ({"n": 1}, {"op": "increment", "path": ["n"], "value": True}, "needs a number"),
        ({"l": {}}, {"op": "append", "path": ["l"], "value": 1}, "not a list"),
        ([1], {"op": "merge", "value": {"a": 1}}, "not an object"),
        ({"a": 1}, {"op": "set", "path": ["a", "b"], "value": 1}, "not an object"),
        (None, {"op": "explode", "value": 1}, "unknown op"),
        (None, {"op": "set", "path": "a.b", "value": 1}, "list of strings"),
        (None, {"op": "set", "path": ["a"]}, "needs a value"),
    ],
)
def test_ops_that_do_not_fit_are_rejected(value: Any, op: Any, reason: str) -> None:
    with pytest.raises(InvalidUpdate, match=reason):
        apply_ops(value, [op])


def test_op_value_that_is_not_json_is_rejected() -> None:
    with pytest.raises(InvalidPayload, match="not a JSON value"):
        apply_ops(None, [{"op": "set", "value": {1, 2}}])


def test_empty_op_list_is_rejected() -> None:
    with pytest.raises(InvalidUpdate, match="non-empty"):
        apply_ops(None, [])
