"""Check-and-copy of JSON values: what crosses the bus is copied, as it would be on a wire.

The copy is also where a value is checked against the limits every boundary shares: it nests at
most :data:`MAX_DEPTH` levels, its text has no lone surrogate (it would not encode as UTF-8),
and its JSON text is at most :data:`MAX_VALUE_BYTES` long when it is stored. A value that breaks
one is refused with :class:`~tackroom.engine.errors.InvalidPayload` (``invalid_payload``) where
it enters, instead of being stored where nobody can read it back.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pydantic_core
from pydantic import BaseModel

from tackroom.engine.errors import InvalidPayload

__all__ = [
    "MAX_CONTENT_DEPTH",
    "MAX_DEPTH",
    "MAX_RESULT_DEPTH",
    "MAX_VALUE_BYTES",
    "dumps",
    "loads",
    "parse_json",
    "to_json_value",
]

MAX_DEPTH = 128
"""How deeply a JSON value may nest where it enters: a payload, a stored value, a stream record,
a channel frame, a socket frame's payload, a CLI payload, a config file. ``[]`` is one level."""

MAX_CONTENT_DEPTH = MAX_DEPTH // 2
"""How deeply a model's tool-call arguments may nest: the messages, turn records and events
that carry them add levels of their own and must still fit in :data:`MAX_DEPTH`."""

MAX_RESULT_DEPTH = MAX_DEPTH + MAX_CONTENT_DEPTH
"""How deeply a function's result may nest: it may wrap stored values in an envelope of its
own. Still under what every reader handles (pydantic serializes at most 255 levels)."""

MAX_VALUE_BYTES = 16 * 1024 * 1024
"""The longest JSON text (in UTF-8 bytes) of one stored value, queued payload or stream record,
and of a payload read from text (a CLI payload)."""


def to_json_value(value: Any, *, what: str = "payload", max_depth: int = MAX_DEPTH) -> Any:
    """A deep copy of ``value`` as plain JSON types; ``InvalidPayload`` if it is not JSON or
    nests deeper than ``max_depth``.

    A pydantic model is dumped as JSON and taken as it is: it was built and validated in this
    process, and dumping it already walked it.
    """
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    try:
        return _copy(value, what, max_depth)
    except _TooDeep:
        raise InvalidPayload(f"{what}: nests deeper than {max_depth} levels") from None


class _TooDeep(Exception):
    """Raised by ``_copy`` alone, which does not know the limit it counts down from."""


def _copy(value: Any, what: str, levels: int) -> Any:
    """``levels``: how many containers may still open, ``value`` itself included.

    The walk is the hot path of every engine call: an object's plain members are copied in its
    own loop, without a call each.
    """
    kind = type(value)
    if kind is dict:
        if levels <= 0:
            raise _TooDeep
        levels -= 1
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str or not key.isascii():
                _check_key(key, what)
            member = type(item)
            if member is str:
                out[key] = item if item.isascii() else _checked_text(item, what)
            elif member is int or member is bool or item is None:
                out[key] = item
            else:
                out[key] = _copy(item, what, levels)
        return out
    if kind is list or kind is tuple:
        if levels <= 0:
            raise _TooDeep
        levels -= 1
        return [_copy(item, what, levels) for item in value]
    if kind is str:
        return value if value.isascii() else _checked_text(value, what)
    if kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise InvalidPayload(f"{what}: {value!r} is not a JSON number")
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, bool | int | str):
        return kind.__mro__[1](value) if kind is not bool else bool(value)
    raise InvalidPayload(f"{what}: {type(value).__name__} is not a JSON value")


def _check_key(key: Any, what: str) -> None:
    if type(key) is not str:
        raise InvalidPayload(f"{what}: object key {key!r} is not a string")
    _checked_text(key, what)


def _checked_text(text: str, what: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidPayload(
            f"{what}: text holds a lone surrogate {text[exc.start]!r}, which is not Unicode"
        ) from None
    return text


def dumps(value: Any) -> str:
    """The compact JSON text of a checked value; ``InvalidPayload`` over ``MAX_VALUE_BYTES``.

    pydantic-core's encoder writes what ``json.dumps(separators=(",", ":"),
    ensure_ascii=False)`` would, but for a float's exponent (``1e-7``, not ``1e-07``), in a
    third of the time: every stored value and wire frame goes through here.
    """
    text = pydantic_core.to_json(value).decode()
    if _utf8_longer_than(text, MAX_VALUE_BYTES):
        raise InvalidPayload(f"the value is longer than {MAX_VALUE_BYTES} bytes as JSON")
    return text


def _utf8_longer_than(text: str, limit: int) -> bool:
    if len(text) > limit:
        return True
    if len(text) * 4 <= limit or text.isascii():
        return False
    return len(text.encode("utf-8", "surrogatepass")) > limit


def loads(text: str | bytes) -> Any:
    """Parse stored JSON text (already checked when it was written).

    pydantic-core's parser is the faster; the standard one still reads what it refuses (an
    escaped lone surrogate, in text written before values were checked for them).
    """
    try:
        return pydantic_core.from_json(text)
    except ValueError:
        return json.loads(text)


def parse_json(text: str | bytes, *, what: str = "payload", max_depth: int = MAX_DEPTH) -> Any:
    """A JSON value from text that came from outside (a CLI payload, a model's arguments).

    ``InvalidPayload`` (its message starts with ``what``) if the text is longer than
    ``MAX_VALUE_BYTES``, is not UTF-8 or not JSON (``NaN`` and ``Infinity`` included), nests
    deeper than ``max_depth``, or holds a lone surrogate.
    """
    if len(text) > MAX_VALUE_BYTES:
        raise InvalidPayload(f"{what}: longer than {MAX_VALUE_BYTES} bytes")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise InvalidPayload(f"{what}: nests deeper than {max_depth} levels") from None
    except UnicodeDecodeError as exc:
        raise InvalidPayload(f"{what}: not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        raise InvalidPayload(f"{what}: invalid JSON: {exc}") from None
    return to_json_value(value, what=what, max_depth=max_depth)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")
