"""Check-and-copy of JSON values: what crosses the bus is copied, as it would be on a wire."""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

from tackroom.engine.errors import InvalidPayload

__all__ = ["dumps", "loads", "to_json_value"]


def to_json_value(value: Any, *, what: str = "payload") -> Any:
    """A deep copy of ``value`` as plain JSON types; ``InvalidPayload`` if it is not JSON."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return _copy(value, what)


def _copy(value: Any, what: str) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise InvalidPayload(f"{what}: {value!r} is not a JSON number")
        return value
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise InvalidPayload(f"{what}: object key {key!r} is not a string")
            out[key] = _copy(item, what)
        return out
    if kind is list or kind is tuple:
        return [_copy(item, what) for item in value]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, bool | int | str):
        return kind.__mro__[1](value) if kind is not bool else bool(value)
    raise InvalidPayload(f"{what}: {type(value).__name__} is not a JSON value")


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str) -> Any:
    return json.loads(text)
