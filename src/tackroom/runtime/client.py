"""``LocalClient``: trigger functions of a running ``tackroom serve`` through its local endpoint.

Errors are the engine's own typed errors, rebuilt from the wire (``FunctionNotFound`` with its
suggestions, ``InvocationError`` with its ``remote_code``, ...). Many triggers may run at once
on one client; a single reader task owned by the client routes answers by request id.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from pathlib import Path
from typing import Any

from opentelemetry import propagate

from tackroom.engine.errors import InvocationTimeout
from tackroom.engine.jsonvalue import to_json_value
from tackroom.engine.protocol import DEFAULT_TIMEOUT, Running
from tackroom.runtime.config import DEFAULT_MAX_FRAME_BYTES
from tackroom.runtime.errors import EndpointUnavailable, FrameTooLarge, InvalidFrame
from tackroom.runtime.tasks import TaskSet
from tackroom.runtime.wire import (
    WIRE_SCHEMA_VERSION,
    decode_error,
    encode_frame,
    read_frame,
    socket_path_problem,
)

__all__ = ["RESPONSE_GRACE", "LocalClient"]

RESPONSE_GRACE = 5.0
"""Seconds the client waits past a call's timeout for the endpoint's own timeout answer."""

_log = logging.getLogger("tackroom.client")


class LocalClient(Running):
    """A connection to the local endpoint at ``path``; use it as an async context manager."""

    def __init__(self, path: Path, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.path = path
        self.max_frame_bytes = max_frame_bytes
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._write_lock = asyncio.Lock()
        self._tasks = TaskSet(owner="local client")
        self._lost: str | None = None

    async def start(self) -> None:
        """Connect (what ``async with`` does)."""
        await self.connect()

    async def connect(self) -> None:
        problem = socket_path_problem(self.path)
        if problem is not None:
            raise EndpointUnavailable(problem)
        try:
            reader, self._writer = await asyncio.open_unix_connection(
                self.path, limit=self.max_frame_bytes
            )
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise EndpointUnavailable(
                f"no tackroom serve is listening on {self.path} ({exc.strerror or exc})"
            ) from None
        except OSError as exc:
            raise EndpointUnavailable(f"cannot connect to {self.path}: {exc}") from None
        self._tasks.spawn(self._read_loop(reader), name="tackroom-client-reader")

    async def close(self) -> None:
        await self._tasks.cancel_all()
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        self._fail_pending("client closed")

    async def trigger(
        self, function_id: str, payload: Any = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """Call ``function_id`` on the served engine and return its result."""
        if self._writer is None or self._lost is not None:
            raise EndpointUnavailable(self._lost or f"not connected to {self.path}")
        frame_id = str(next(self._ids))
        headers: dict[str, str] = {}
        propagate.inject(headers)
        frame: dict[str, Any] = {
            "schema_version": WIRE_SCHEMA_VERSION,
            "id": frame_id,
            "function_id": function_id,
            "payload": to_json_value(payload),
            "timeout": timeout,
        }
        if headers:
            frame["headers"] = headers
        data = encode_frame(frame)
        if len(data) > self.max_frame_bytes:
            raise FrameTooLarge(
                f"request of {len(data)} bytes is longer than the limit of "
                f"{self.max_frame_bytes} bytes"
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[frame_id] = future
        try:
            async with self._write_lock:
                self._writer.write(data)
                await self._writer.drain()
            return await asyncio.wait_for(future, timeout + RESPONSE_GRACE)
        except TimeoutError:
            raise InvocationTimeout(function_id, timeout) from None
        except ConnectionError as exc:
            raise EndpointUnavailable(f"connection to {self.path} lost: {exc}") from None
        finally:
            self._pending.pop(frame_id, None)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        reason = "the endpoint closed the connection"
        try:
            while True:
                try:
                    line = await read_frame(reader, limit=self.max_frame_bytes)
                except FrameTooLarge:
                    _log.warning("dropped a response longer than %d bytes", self.max_frame_bytes)
                    continue
                if line is None:
                    return
                self._dispatch(line)
        except ConnectionError as exc:
            reason = f"connection to {self.path} lost: {exc}"
        finally:
            self._lost = reason
            self._fail_pending(reason)

    def _dispatch(self, line: bytes) -> None:
        try:
            frame = json.loads(line)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            _log.warning("dropped a malformed response frame")
            return
        future = self._pending.get(str(frame.get("id")))
        if future is None or future.done():
            if frame.get("ok") is False:
                _log.warning("endpoint error not tied to a pending call: %s", frame.get("error"))
            return
        error = frame.get("error")
        if frame.get("schema_version") != WIRE_SCHEMA_VERSION:
            future.set_exception(
                InvalidFrame(f"response has schema_version {frame.get('schema_version')!r}")
            )
        elif frame.get("ok") is True:
            future.set_result(frame.get("result"))
        else:
            future.set_exception(decode_error(error if isinstance(error, dict) else {}))

    def _fail_pending(self, reason: str) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(EndpointUnavailable(reason))
