"""The string formats the reader checks, each strictly: a value that needs repair is refused.

``jsonschema``'s own format checks are lenient or need optional packages, so each format is
checked here with the standard library or pydantic: dates by :mod:`datetime`, UUIDs by
:mod:`uuid`, URLs by pydantic's ``AnyHttpUrl`` (after refusing white space and control
characters, which pydantic would silently drop), addresses by the RFC 5322 ``dot-atom`` grammar
in ASCII (no quoted local parts, no IP-literal domains, no look-alike Unicode).
"""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Callable
from functools import cache

from pydantic import AnyHttpUrl, TypeAdapter, ValidationError

from tackroom.contracts.quarantine import Format

__all__ = ["FORMAT_LENGTH", "format_problem"]

FORMAT_LENGTH: dict[Format, int] = {
    "email": 254,
    "date": 10,
    "date-time": 35,
    "uri": 512,
    "uuid": 36,
}
"""The longest value of each format (a ``maxLength`` above it is refused)."""

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@(?:{_LABEL}\.)+[A-Za-z]{{2,63}}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:[Zz]|[+-]\d{2}:\d{2})"
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")


def format_problem(fmt: str, value: object) -> str | None:
    """Why ``value`` is not a ``fmt`` string (``None``: it is)."""
    if not isinstance(value, str):
        return f"{value!r} is not a string"
    check = _CHECKS.get(fmt)
    if check is None:
        return f"format {fmt!r} is not checked"
    return None if check(value) else f"{value!r} is not a valid {fmt}"


def _email(value: str) -> bool:
    local = value.rpartition("@")[0]
    return _EMAIL.fullmatch(value) is not None and len(local) <= 64 and len(value) <= 254


def _date(value: str) -> bool:
    if _DATE.fullmatch(value) is None:
        return False
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _date_time(value: str) -> bool:
    if _DATE_TIME.fullmatch(value) is None:
        return False
    try:
        datetime.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


@cache
def _url_adapter() -> TypeAdapter[AnyHttpUrl]:
    return TypeAdapter(AnyHttpUrl)


def _uri(value: str) -> bool:
    if _SPACE_OR_CONTROL.search(value) or not value.lower().startswith(("http://", "https://")):
        return False
    try:
        _url_adapter().validate_python(value)
    except ValidationError:
        return False
    return True


def _uuid(value: str) -> bool:
    if _UUID.fullmatch(value) is None:
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


_CHECKS: dict[str, Callable[[str], bool]] = {
    "email": _email,
    "date": _date,
    "date-time": _date_time,
    "uri": _uri,
    "uuid": _uuid,
}
