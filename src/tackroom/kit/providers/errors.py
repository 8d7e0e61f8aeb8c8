"""Provider failures and how an SDK exception maps to the shared error kinds.

- HTTP 401 / 403 → ``auth``, never retried;
- HTTP 429 → ``rate_limited``, retried after ``Retry-After`` (up to a cap);
- HTTP 400 / 413 / 422 naming the context length → ``context_overflow``, never retried;
- HTTP 5xx (and 529), a connection lost or refused, a timeout, a malformed or cut stream →
  ``transient``, retried with exponential backoff and jitter;
- any other 4xx, an unexpected exception → ``permanent``, never retried.

Classification is duck-typed on the exception (``status_code``, ``response.headers``,
``body``, class names along the MRO), so this module never imports an SDK: both official SDKs
raise ``APIStatusError`` subclasses with those attributes, ``APIConnectionError`` /
``APITimeoutError``, and let ``httpx`` transport errors escape from a broken stream.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.messages import ErrorKind

__all__ = [
    "RETRYABLE",
    "ProviderFailure",
    "StreamEndedEarly",
    "classify_exception",
    "failure_for_status",
    "parse_retry_after",
    "redact",
]

RETRYABLE: frozenset[ErrorKind] = frozenset({"rate_limited", "transient"})

_CONTEXT_MARKERS = (
    "context_length",
    "context length",
    "context window",
    "context_window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "request_too_large",
    "exceeds the model",
    "tokens exceed",
    "reduce the length",
)
_RATE_MARKERS = ("rate_limit", "rate limit", "too_many_requests", "quota")
_AUTH_MARKERS = ("authentication", "permission", "invalid_api_key", "unauthorized")
_TRANSIENT_MARKERS = ("overloaded", "server_error", "api_error", "internal", "unavailable")


class ProviderFailure(Exception):
    """A failed model call with its error kind; ``retry_after`` is the server's wait, if any."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        connection: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.retry_after = retry_after
        self.status = status
        self.connection = connection
        """The server could not be reached or the connection broke."""

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    def redacted(self, secrets: Iterable[str]) -> ProviderFailure:
        """The same failure with every secret removed from its message."""
        message = redact(self.message, secrets)
        return self if message == self.message else self.saying(message)

    def saying(self, message: str) -> ProviderFailure:
        """The same failure (kind, wait, status, connection) with another message."""
        return ProviderFailure(
            self.kind,
            message,
            retry_after=self.retry_after,
            status=self.status,
            connection=self.connection,
        )

    def __repr__(self) -> str:
        return f"ProviderFailure({self.kind!r}, {self.message!r}, retry_after={self.retry_after})"


class StreamEndedEarly(Exception):
    """The provider's stream ended before it finished the message (no stop reason)."""


@dataclass(frozen=True, slots=True)
class _Body:
    message: str
    type: str
    code: str


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each secret (of 4 characters or more) replaced by ``[redacted]``."""
    for secret in secrets:
        if len(secret) >= 4 and secret in text:
            text = text.replace(secret, "[redacted]")
    return text


def parse_retry_after(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    getter = getattr(headers, "get", None)
    if getter is None:
        return None
    raw_ms = getter("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except (TypeError, ValueError):
            value = -1.0
        if value >= 0:
            return value
    raw = getter("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except (TypeError, ValueError):
        try:
            when = email.utils.parsedate_to_datetime(str(raw))
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, seconds)
    return seconds if seconds >= 0 else None


def _body_of(raw: Any) -> _Body:
    """The error ``message``, ``type`` and ``code`` of an API error body, whatever its shape."""
    if isinstance(raw, (bytes, str)):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        try:
            raw = json.loads(text)
        except ValueError:
            return _Body(text.strip()[:500], "", "")
    if not isinstance(raw, Mapping):
        return _Body("", "", "")
    error = raw.get("error", raw)
    if isinstance(error, str):
        return _Body(error, str(raw.get("type") or ""), str(raw.get("code") or ""))
    if not isinstance(error, Mapping):
        return _Body("", "", "")
    return _Body(
        str(error.get("message") or ""),
        str(error.get("type") or ""),
        str(error.get("code") or ""),
    )


def _mentions(body: _Body, markers: tuple[str, ...]) -> bool:
    haystack = f"{body.message} {body.type} {body.code}".lower()
    return any(marker in haystack for marker in markers)


def _describe(prefix: str, body: _Body, fallback: str) -> str:
    label = body.type or body.code
    detail = body.message or fallback
    return f"{prefix} ({label}): {detail}" if label else f"{prefix}: {detail}"


def failure_for_status(
    status: int, body: Any, headers: Any = None, *, fallback: str = ""
) -> ProviderFailure:
    """The failure an HTTP error status (with its JSON body and headers) means."""
    parsed = _body_of(body)
    message = _describe(f"HTTP {status}", parsed, fallback or "no details")
    if status in (401, 403):
        return ProviderFailure("auth", message, status=status)
    if status == 429:
        return ProviderFailure(
            "rate_limited", message, retry_after=parse_retry_after(headers), status=status
        )
    if status in (400, 413, 422) and _mentions(parsed, _CONTEXT_MARKERS):
        return ProviderFailure("context_overflow", message, status=status)
    if status >= 500:
        return ProviderFailure(
            "transient", message, retry_after=parse_retry_after(headers), status=status
        )
    if status >= 400:
        return ProviderFailure("permanent", message, status=status)
    return _failure_for_body(parsed, fallback=fallback)


def _failure_for_body(parsed: _Body, *, fallback: str) -> ProviderFailure:
    """An error reported inside a stream that had started fine (no HTTP status to go by)."""
    message = _describe("the provider reported an error", parsed, fallback or "no details")
    if _mentions(parsed, _CONTEXT_MARKERS):
        return ProviderFailure("context_overflow", message)
    if _mentions(parsed, _RATE_MARKERS):
        return ProviderFailure("rate_limited", message)
    if _mentions(parsed, _AUTH_MARKERS):
        return ProviderFailure("auth", message)
    if "invalid_request" in parsed.type.lower() and not _mentions(parsed, _TRANSIENT_MARKERS):
        return ProviderFailure("permanent", message)
    return ProviderFailure("transient", message)


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _is_transport_error(exc: BaseException) -> bool:
    module = type(exc).__module__
    return module.startswith(("httpx", "httpcore", "h11", "h2"))


def _cause_text(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    if cause is None:
        return ""
    return str(cause) or type(cause).__name__


def classify_exception(exc: BaseException) -> ProviderFailure:
    """The :class:`ProviderFailure` an exception from an SDK call or stream means."""
    if isinstance(exc, ProviderFailure):
        return exc
    if isinstance(exc, StreamEndedEarly):
        return ProviderFailure("transient", f"the stream ended early: {exc}", connection=True)
    names = _class_names(exc)
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    if isinstance(status, int) and response is not None and "APIStatusError" in names:
        body = getattr(exc, "body", None)
        headers = getattr(response, "headers", None)
        return failure_for_status(status, body, headers, fallback=str(exc))
    if "APITimeoutError" in names:
        return ProviderFailure("transient", "the request timed out", connection=True)
    if "APIConnectionError" in names:
        cause = _cause_text(exc)
        detail = f": {cause}" if cause else ""
        return ProviderFailure("transient", f"connection failed{detail}", connection=True)
    if "APIError" in names:
        body = getattr(exc, "body", None)
        if body is None:
            body = {"message": str(exc)}
        return _failure_for_body(_body_of(body), fallback=str(exc))
    if _is_transport_error(exc):
        return ProviderFailure(
            "transient",
            f"the connection broke mid-stream ({type(exc).__name__}: {exc})",
            connection=True,
        )
    if isinstance(exc, json.JSONDecodeError):
        return ProviderFailure("transient", f"the provider sent a malformed stream: {exc}")
    if isinstance(exc, TimeoutError):
        return ProviderFailure("transient", "the request timed out", connection=True)
    if isinstance(exc, OSError):
        return ProviderFailure("transient", f"connection failed: {exc}", connection=True)
    return ProviderFailure("permanent", f"unexpected error: {type(exc).__name__}: {exc}")
