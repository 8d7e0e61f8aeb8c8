"""The atomic update ops of ``Engine.update_state``, as a pure function over JSON values."""

from __future__ import annotations

from typing import Any

from tackroom.engine.errors import InvalidPayload, InvalidUpdate
from tackroom.engine.jsonvalue import MAX_DEPTH, to_json_value
from tackroom.engine.protocol import UpdateOp

__all__ = ["apply_ops"]

_KINDS = frozenset({"set", "merge", "append", "increment", "remove"})


def apply_ops(value: Any, ops: list[UpdateOp]) -> Any:
    """Return ``value`` with ``ops`` applied in order; ``value`` itself is not modified."""
    if not isinstance(ops, list) or not ops:
        raise InvalidUpdate("ops must be a non-empty list")
    result = to_json_value(value, what="state value")
    for index, op in enumerate(ops):
        result = _apply(result, op, index)
    return result


def _apply(root: Any, op: Any, index: int) -> Any:
    if not isinstance(op, dict):
        raise InvalidUpdate(f"op {index}: must be an object, got {type(op).__name__}")
    kind = op.get("op")
    if kind not in _KINDS:
        raise InvalidUpdate(f"op {index}: unknown op {kind!r} (known: {', '.join(sorted(_KINDS))})")
    path = op.get("path") or []
    if not isinstance(path, list) or not all(isinstance(part, str) for part in path):
        raise InvalidUpdate(f"op {index}: path must be a list of strings")
    if len(path) + (kind == "append") > MAX_DEPTH:
        raise InvalidPayload(
            f"op {index}: a path of {len(path)} keys nests deeper than {MAX_DEPTH} levels"
        )
    if not path:
        return None if kind == "remove" else _apply_at(root, kind, op, index, [])
    if root is None:
        root = {}
    if not isinstance(root, dict):
        raise InvalidUpdate(f"op {index}: the root is {type(root).__name__}, not an object")
    parent: dict[str, Any] = root
    for depth, part in enumerate(path[:-1]):
        child = parent.get(part)
        if child is None:
            child = parent[part] = {}
        elif not isinstance(child, dict):
            where = "/".join(path[: depth + 1])
            raise InvalidUpdate(f"op {index}: {where} is {type(child).__name__}, not an object")
        parent = child
    last = path[-1]
    if kind == "remove":
        parent.pop(last, None)
    else:
        parent[last] = _apply_at(parent.get(last), kind, op, index, path)
    return root


def _apply_at(current: Any, kind: str, op: dict[str, Any], index: int, path: list[str]) -> Any:
    if "value" not in op:
        raise InvalidUpdate(f"op {index}: {kind} needs a value")
    where = "/".join(path) or "the root"
    # the value lands under its path (and in a list, for append): the whole must fit MAX_DEPTH
    room = MAX_DEPTH - len(path) - (kind == "append")
    value = to_json_value(op["value"], what=f"op {index} value at {where}", max_depth=room)
    if kind == "set":
        return value
    if kind == "merge":
        if not isinstance(value, dict):
            raise InvalidUpdate(f"op {index}: merge needs an object value")
        if current is None:
            return value
        if not isinstance(current, dict):
            raise InvalidUpdate(f"op {index}: cannot merge into {where}: not an object")
        return {**current, **value}
    if kind == "append":
        if current is None:
            return [value]
        if not isinstance(current, list):
            raise InvalidUpdate(f"op {index}: cannot append to {where}: not a list")
        return [*current, value]
    if not _is_number(value):
        raise InvalidUpdate(f"op {index}: increment needs a number value")
    if current is None:
        return value
    if not _is_number(current):
        raise InvalidUpdate(f"op {index}: cannot increment {where}: not a number")
    return current + value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
