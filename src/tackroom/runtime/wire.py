"""Frames of the local endpoint: newline-delimited JSON, one object per line.

Request ``{schema_version, id, function_id, payload, timeout, headers?}``; response
``{schema_version, id, ok: true, result}`` or ``{schema_version, id, ok: false, error}`` where
``error`` is ``EngineError.to_wire()``. A frame that cannot be tied to a request (it is too long,
not JSON, or nested too deeply to parse) is answered with ``id: null``; a payload that parses but
nests deeper than ``MAX_DEPTH`` is the engine's ``invalid_payload``, with the request's id.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from tackroom.engine.errors import EngineError, error_from_wire
from tackroom.engine.jsonvalue import MAX_DEPTH
from tackroom.engine.protocol import DEFAULT_TIMEOUT
from tackroom.runtime.errors import (
    EndpointUnavailable,
    FrameTooLarge,
    InvalidFrame,
    TooManyStreams,
    UnknownStreamHandle,
)
from tackroom.runtime.typed import describe_validation_error

__all__ = [
    "MAX_SOCKET_PATH_BYTES",
    "WIRE_SCHEMA_VERSION",
    "FrameId",
    "RequestFrame",
    "decode_error",
    "encode_frame",
    "error_frame",
    "parse_request",
    "read_frame",
    "result_frame",
    "socket_path_problem",
]

WIRE_SCHEMA_VERSION = 1

MAX_SOCKET_PATH_BYTES = 107
"""The longest path a Unix socket may have (Linux: ``sun_path`` holds 108 bytes with its NUL)."""

FrameId = StrictStr | StrictInt


class RequestFrame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int
    id: FrameId
    function_id: str = Field(min_length=1)
    payload: Any = None
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    headers: dict[str, str] | None = None


def encode_frame(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def result_frame(frame_id: FrameId, result: Any) -> dict[str, Any]:
    return {"schema_version": WIRE_SCHEMA_VERSION, "id": frame_id, "ok": True, "result": result}


def error_frame(frame_id: FrameId | None, error: EngineError) -> dict[str, Any]:
    return {
        "schema_version": WIRE_SCHEMA_VERSION,
        "id": frame_id,
        "ok": False,
        "error": error.to_wire(),
    }


_LOCAL_ERRORS: dict[str, type[EngineError]] = {
    cls.__name__: cls
    for cls in (
        InvalidFrame,
        FrameTooLarge,
        EndpointUnavailable,
        UnknownStreamHandle,
        TooManyStreams,
    )
}


def decode_error(wire: dict[str, Any]) -> EngineError:
    """``error_from_wire`` plus the endpoint's own frame errors."""
    local = _LOCAL_ERRORS.get(str(wire.get("type")))
    if local is not None:
        return local(str(wire.get("message", "")))
    return error_from_wire(wire)


def parse_request(line: bytes) -> RequestFrame:
    """Parse one request line; ``InvalidFrame`` carries the id in ``frame_id`` when it had one."""
    try:
        data = json.loads(line, parse_constant=_reject_constant)
    except ValueError as exc:  # also UnicodeDecodeError and JSONDecodeError
        raise InvalidFrame(f"frame is not JSON: {exc}") from None
    except RecursionError:  # the engine refuses a payload past MAX_DEPTH with its id
        raise InvalidFrame(f"frame nests deeper than {MAX_DEPTH} levels") from None
    if not isinstance(data, dict):
        raise InvalidFrame(f"frame must be a JSON object, got {type(data).__name__}")
    raw_id = data.get("id")
    frame_id = raw_id if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else None
    version = data.get("schema_version")
    if version != WIRE_SCHEMA_VERSION:
        raise InvalidFrame(
            f"unsupported schema_version {version!r} (this endpoint speaks {WIRE_SCHEMA_VERSION})",
            frame_id=frame_id,
        )
    try:
        return RequestFrame.model_validate(data)
    except ValidationError as exc:
        raise InvalidFrame(
            f"invalid request: {describe_validation_error(exc)}", frame_id=frame_id
        ) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def socket_path_problem(path: Path) -> str | None:
    """Why the endpoint cannot be at ``path``, checked before anything touches the file system."""
    size = len(os.fsencode(path))
    if size <= MAX_SOCKET_PATH_BYTES:
        return None
    return (
        f"socket path {path} is {size} bytes, longer than the {MAX_SOCKET_PATH_BYTES} bytes a "
        "Unix socket path may have: choose a shorter endpoint.socket"
    )


async def read_frame(reader: asyncio.StreamReader, *, limit: int) -> bytes | None:
    """The next line without its newline; ``None`` at end of stream.

    A line longer than ``limit`` (the reader's own limit) is consumed up to its newline and
    reported as ``FrameTooLarge``, so the connection stays usable for the next frame.
    """
    try:
        return (await reader.readuntil(b"\n"))[:-1]
    except asyncio.IncompleteReadError as exc:
        return exc.partial or None
    except asyncio.LimitOverrunError as exc:
        await reader.readexactly(exc.consumed)
        await _discard_line(reader)
        raise FrameTooLarge(f"frame is longer than the limit of {limit} bytes") from None


async def _discard_line(reader: asyncio.StreamReader) -> None:
    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.IncompleteReadError:
            return
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
