"""Headers and redirects of ``http::fetch``: pure rules, no I/O.

- Request headers are the model's, minus nothing: a header the tool sets itself (``Host``,
  ``Content-Length``, hop-by-hop ones) or a malformed one is refused with ``invalid_header`` (the
  error names the header, never its value).
- On a redirect to another origin (scheme, host or port) ``Authorization``, ``Cookie`` and
  ``Proxy-Authorization`` are dropped; a 303 (and a 301/302 after a POST) becomes a GET without
  the body and its ``Content-*`` headers; 307 and 308 keep method and body.
- Response headers come back lower-case, repeated ones joined with ``", "``, without hop-by-hop
  headers (and those ``Connection`` names) and ``Set-Cookie``; each value and the whole are capped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from tackroom.contracts.http import INVALID_HEADER, Method
from tackroom.engine.errors import FunctionError

__all__ = [
    "REDIRECT_STATUSES",
    "redirected_headers",
    "redirected_method",
    "request_headers",
    "response_headers",
]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_HEADER_VALUE = 2048
"""Characters kept of one response header value (the rest is cut, marked with ``…``)."""

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_SET_BY_TOOL = _HOP_BY_HOP | {"host", "content-length", "expect"}
_NOT_RETURNED = _HOP_BY_HOP | {"set-cookie", "set-cookie2"}
_CREDENTIALS = frozenset({"authorization", "cookie", "proxy-authorization"})


def _invalid(message: str) -> FunctionError:
    return FunctionError(INVALID_HEADER, message)


def request_headers(headers: Mapping[str, str], *, max_bytes: int) -> dict[str, str]:
    """The model's headers, checked: valid names, no line breaks, none the tool sets itself."""
    size = 0
    for name, value in headers.items():
        if not _TOKEN.match(name):
            raise _invalid(f"{name[:64]!r} is not a valid header name")
        if name.lower() in _SET_BY_TOOL:
            raise _invalid(f"the {name} header is set by the tool; leave it out")
        if any(char in value for char in "\r\n\0"):
            raise _invalid(f"the value of the {name} header contains a line break or NUL")
        try:
            size += len(name) + len(value.encode("utf-8")) + 4
        except UnicodeEncodeError:
            raise _invalid(f"the value of the {name} header is not valid Unicode") from None
    if size > max_bytes:
        raise _invalid(f"the request headers are {size} bytes; the limit is {max_bytes}")
    return dict(headers)


def redirected_method(status: int, method: Method) -> tuple[Method, bool]:
    """The method of the request that follows a ``status`` redirect, and whether the body goes
    with it (the rules browsers and httpx follow)."""
    if status == 303 and method != "HEAD":
        return "GET", False
    if status in (301, 302) and method == "POST":
        return "GET", False
    return method, True


def redirected_headers(
    headers: Mapping[str, str], *, same_origin: bool, body_kept: bool
) -> dict[str, str]:
    """``headers`` for the next hop: no credentials to another origin, no ``Content-*`` headers
    once the body is dropped."""
    kept: dict[str, str] = {}
    for name, value in headers.items():
        lower = name.lower()
        if not same_origin and lower in _CREDENTIALS:
            continue
        if not body_kept and lower.startswith("content-"):
            continue
        kept[name] = value
    return kept


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def response_headers(raw: Iterable[tuple[bytes, bytes]], *, max_bytes: int) -> dict[str, str]:
    """What the model sees of the response's headers (see the module's docstring); headers past
    ``max_bytes`` in total are left out."""
    items = [(_text(name).lower(), _text(value)) for name, value in raw]
    named = {
        token.strip().lower()
        for name, value in items
        if name == "connection"
        for token in value.split(",")
    }
    joined: dict[str, str] = {}
    for name, value in items:
        if name in _NOT_RETURNED or name in named:
            continue
        joined[name] = f"{joined[name]}, {value}" if name in joined else value
    kept: dict[str, str] = {}
    size = 0
    for name, value in joined.items():
        if len(value) > MAX_HEADER_VALUE:
            value = value[: MAX_HEADER_VALUE - 1] + "…"
        size += len(name) + len(value) + 4
        if size > max_bytes:
            break
        kept[name] = value
    return kept
