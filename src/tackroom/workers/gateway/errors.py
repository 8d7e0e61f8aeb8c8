"""Every failure as one JSON shape — ``{"error": {"code", "message", "details"?}}`` — and the
status it gets: bad input is a 4xx that says what is wrong, a bus error keeps its code, a bug is a
500 logged once (with its traceback, in the log only).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tackroom.contracts.gateway import ErrorBody, ErrorResponse
from tackroom.engine.errors import (
    EngineClosed,
    EngineError,
    EngineUnavailable,
    FunctionNotFound,
    InvocationError,
    InvocationTimeout,
)

__all__ = [
    "ApiError",
    "CatchAll",
    "api_error",
    "bus_error",
    "error_response",
    "http_exception",
    "invalid",
]

_log = logging.getLogger("tackroom.gateway")

_STATUS_OF_CODE: dict[str, int] = {
    "invalid_request": 422,
    "invalid_cursor": 422,
    "not_found": 404,
    "unknown_session": 404,
    "session_not_found": 404,
    "entry_not_found": 404,
    "not_pinnable": 422,
    "not_pending": 404,
    "budget_not_found": 404,
    "trace_not_found": 404,
    "conflict": 409,
    "busy": 409,
    "session_busy": 409,
    "session_exists": 409,
    "session_shared": 409,
    "already_decided": 409,
    "expired": 409,
    "call_conflict": 409,
    "contention": 409,
    "budget_exists": 409,
    "budget_exceeded": 409,
    "approver_not_allowed": 403,
    "quota_exceeded": 429,
    "runs_held": 423,
}
"""Codes the workers answer with, and the status each gets over HTTP."""

_STATUS_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}


class ApiError(Exception):
    """A failure with its HTTP status, code and one-line message (raised by routes)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers


def invalid(exc: ValidationError, *, where: str = "") -> ApiError:
    """A 422 with pydantic's first reason on one line (the field in ``details.field``)."""
    first = exc.errors(include_url=False)[0]
    field = ".".join(str(part) for part in first["loc"])
    place = ".".join(part for part in (where, field) if part)
    count = exc.error_count()
    more = f" (and {count - 1} more)" if count > 1 else ""
    message = f"{place}: {first['msg']}{more}" if place else f"{first['msg']}{more}"
    return ApiError(422, "invalid_request", message, details={"field": place} if place else None)


def bus_error(exc: EngineError) -> ApiError:
    """What a failed bus call is over HTTP: the worker's own code, with its status."""
    if isinstance(exc, InvocationError):
        status = _STATUS_OF_CODE.get(exc.remote_code, 502)
        code = exc.remote_code if status != 502 else "upstream_error"
        details = {"function_id": exc.function_id}
        if status == 502:
            details["remote_code"] = exc.remote_code
        return ApiError(status, code, _one_line(exc.message), details=details)
    if isinstance(exc, FunctionNotFound):
        return ApiError(
            503,
            "unavailable",
            f"no worker serves {exc.function_id}: boot the worker that does",
            details={"function_id": exc.function_id},
        )
    if isinstance(exc, InvocationTimeout):
        return ApiError(504, "timeout", _one_line(exc.message))
    if isinstance(exc, (EngineUnavailable, EngineClosed)):
        return ApiError(503, "unavailable", f"the engine is unavailable: {_one_line(exc.message)}")
    return ApiError(502, "upstream_error", _one_line(exc.message), details={"code": exc.code})


def _one_line(text: str) -> str:
    return " ".join(text.split())[:2000]


def error_response(error: ApiError, *, headers: Mapping[str, str] | None = None) -> JSONResponse:
    body = ErrorResponse(
        error=ErrorBody(code=error.code, message=error.message, details=error.details)
    )
    return JSONResponse(
        body.model_dump(mode="json", exclude_none=True), status_code=error.status, headers=headers
    )


async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc, headers=exc.headers)


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 (no route, wrong method) in the one error shape."""
    assert isinstance(exc, HTTPException)
    code = _STATUS_CODES.get(exc.status_code, "http_error")
    message = {
        404: f"no route {request.url.path}: see GET /v1/openapi.json",
        405: f"{request.method} is not allowed on {request.url.path}",
    }.get(exc.status_code, str(exc.detail))
    return error_response(ApiError(exc.status_code, code, message), headers=exc.headers)


class CatchAll:
    """The outermost layer: an exception nothing else handled is logged once and answered with a
    500 in the error shape (no traceback leaves the process); once a response has started (an
    SSE stream), the connection is only closed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            _log.exception("gateway: %s %s failed", scope.get("method"), scope.get("path"))
            if not started:
                error = ApiError(500, "internal_error", "the gateway failed; see its log")
                await error_response(error)(scope, receive, send)
