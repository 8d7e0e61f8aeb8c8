"""What an endpoint's answer means: a result, a typed error, or a transient failure to retry.

- 2xx: the JSON body is the result (an empty body is ``null``); a body that is not JSON, or does
  not match the function's ``response_schema``, is ``invalid_response``.
- 4xx: the caller's fault — a :class:`FunctionError` with the remote's message in one line and
  its code (``{"error": {"code", "message"}}``), else ``http_<status>``; never retried. 429 is
  the exception: ``rate_limited``, transient.
- 5xx: ``unavailable``, transient; and a timeout (``timeout``) or a failed connection
  (``connection_failed``) too (see :data:`tackroom.contracts.tools.TRANSIENT_ERROR_CODES`).
- anything else (a redirect, which is not followed): ``http_<status>``.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from tackroom.contracts.http import INVALID_RESPONSE, UNAVAILABLE
from tackroom.engine.errors import FunctionError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = [
    "RATE_LIMITED",
    "Transient",
    "interpret",
    "mask",
    "one_line",
    "schema_validator",
]

RATE_LIMITED = "rate_limited"
_REMOTE_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_MESSAGE_CHARS = 300


class Transient(Exception):
    """A failure worth another attempt of an idempotent function (code and message ready)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def mask(text: str, secrets: list[str]) -> str:
    """``text`` with every secret (four characters or more) replaced by ``***``."""
    for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def one_line(text: str, *, limit: int = _MESSAGE_CHARS) -> str:
    joined = " ".join(text.split())
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def schema_validator(schema: dict[str, Any]) -> Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema)


def _remote_error(data: bytes) -> tuple[str | None, str]:
    """The remote's error code (when it gives a usable one) and message, from its body."""
    text = data.decode("utf-8", "replace").strip()
    try:
        body = json.loads(text) if text else None
    except ValueError:
        return None, text
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        usable = code if isinstance(code, str) and _REMOTE_CODE.match(code) else None
        return usable, message if isinstance(message, str) else json.dumps(error)
    if isinstance(error, str):
        return None, error
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return None, body["message"]
    return None, text


def _said(status: int, message: str) -> str:
    return f"answered {status}: {one_line(message)}" if message else f"answered {status}"


def interpret(status: int, data: bytes, *, where: str, validator: Validator | None = None) -> Any:
    """The result of a call whose endpoint at ``where`` answered ``status`` with ``data``;
    raises :class:`FunctionError` or :class:`Transient`."""
    if 200 <= status < 300:
        return _result(data, where=where, validator=validator)
    code, message = _remote_error(data)
    said = f"{where} {_said(status, message)}"
    if status == 429:
        raise Transient(RATE_LIMITED, said)
    if 500 <= status < 600:
        raise Transient(UNAVAILABLE, said)
    if 400 <= status < 500:
        raise FunctionError(code or f"http_{status}", one_line(message) or said)
    note = " (redirects are not followed)" if 300 <= status < 400 else ""
    raise FunctionError(f"http_{status}", f"{said}{note}")


def _result(data: bytes, *, where: str, validator: Validator | None) -> Any:
    if not data.strip():
        value: Any = None
    else:
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise FunctionError(
                INVALID_RESPONSE, f"{where} answered a body that is not JSON: {exc}"
            ) from None
    if validator is not None:
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            reasons = "; ".join(
                f"{'/'.join(str(p) for p in e.absolute_path) or '(body)'}: {e.message}"
                for e in errors[:3]
            )
            raise FunctionError(
                INVALID_RESPONSE,
                f"{where} answered a body that does not match response_schema: {one_line(reasons)}",
            )
    return value
