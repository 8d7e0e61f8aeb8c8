"""Reading a request: a JSON body within the size limit, query and path values, each validated
into a model — or the 4xx that says what is wrong with it."""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request

from tackroom.contracts.sessions import ID_PATTERN
from tackroom.workers.gateway.errors import ApiError, invalid

__all__ = ["ID", "json_body", "path_id", "query"]

M = TypeVar("M", bound=BaseModel)

ID = re.compile(ID_PATTERN)
"""Session, entry and call ids in a path (printable ASCII but space and ``/``, 1 to 200)."""


async def json_body(request: Request, model: type[M], *, limit: int) -> M:
    """The body as ``model``; an empty body is ``{}``."""
    raw = await _read(request, limit=limit)
    if not raw.strip():
        data: object = {}
    else:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            reason = exc.args[0] if isinstance(exc, ValueError) and exc.args else "nested too deep"
            raise ApiError(400, "invalid_json", f"the body is not JSON: {reason}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc, where="body") from None
    except RecursionError:
        raise ApiError(400, "invalid_json", "the body is nested too deep") from None


async def _read(request: Request, *, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(400, "bad_request", "the client went away before sending the body") from None
    return b"".join(chunks)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "body_too_large", f"the body is over the limit of {limit} bytes")


def query(request: Request, model: type[M]) -> M:
    """The query string as ``model`` (the last of repeated keys wins)."""
    try:
        return model.model_validate(dict(request.query_params))
    except ValidationError as exc:
        raise invalid(exc, where="query") from None


def path_id(request: Request, name: str) -> str:
    value: str = request.path_params[name]
    if not ID.match(value):
        raise ApiError(
            422,
            "invalid_request",
            f"path.{name}: 1 to 200 printable ASCII characters, no space or '/' (got"
            f" {len(value)} characters)",
            details={"field": f"path.{name}"},
        )
    return value
