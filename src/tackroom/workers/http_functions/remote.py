"""Calling one HTTP-hosted function: POST the payload, read the answer within limits, retry.

One ``httpx2`` client serves every function of the worker (connections are kept alive); it is
built at the first call and closed when the worker stops. Redirects are not followed, the
environment's proxy settings are not read. An attempt that fails transiently (5xx, 429, a
timeout, a failed connection) is tried again after a pause, ``retries`` times, only for an
idempotent function; the error after the last attempt says how many there were.

Header values are secrets: filled in at each call, and masked in every message this module
writes (an endpoint that echoes the token in its error does not leak it either).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx2

from tackroom.contracts.http import (
    CONNECTION_FAILED,
    INVALID_HEADER,
    INVALID_RESPONSE,
    TIMEOUT,
    TOO_LARGE,
)
from tackroom.engine.errors import FunctionError
from tackroom.workers.http_functions.answers import (
    Transient,
    interpret,
    mask,
    one_line,
    schema_validator,
)
from tackroom.workers.http_functions.config import (
    JITTER,
    FunctionConfig,
    HttpFunctionsConfig,
    MissingVariable,
    fill_header,
)

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["SECRET_UNAVAILABLE", "Endpoint", "Remote"]

SECRET_UNAVAILABLE = "secret_unavailable"
"""A header names an environment variable that is not set (not transient)."""

_log = logging.getLogger("tackroom.workers.http_functions")


class _TooLarge(Exception):
    pass


class Remote:
    """The worker's HTTP client, built by the first call and closed by :meth:`hold`'s end."""

    def __init__(self, config: HttpFunctionsConfig) -> None:
        self._config = config
        self._client: httpx2.AsyncClient | None = None
        self._building = asyncio.Lock()
        self._closed = False

    async def client(self) -> httpx2.AsyncClient:
        if self._client is None:
            async with self._building:
                if self._closed:
                    raise FunctionError(CONNECTION_FAILED, "the worker is stopping")
                if self._client is None:
                    # Loading the CA store takes ~20 ms: in a thread, the loop keeps running.
                    context = await asyncio.to_thread(
                        httpx2.create_ssl_context, verify=True, trust_env=False
                    )
                    self._client = httpx2.AsyncClient(
                        verify=context,
                        trust_env=False,
                        follow_redirects=False,
                        headers={"User-Agent": self._config.user_agent},
                    )
        return self._client

    async def hold(self) -> None:
        """Wait until cancelled (the worker stopping), then close the client."""
        try:
            await asyncio.Event().wait()
        finally:
            async with self._building:
                self._closed = True
                client, self._client = self._client, None
            if client is not None:
                await client.aclose()


class Endpoint:
    """One configured function: :meth:`call` runs a call through every attempt it may take."""

    def __init__(self, remote: Remote, config: HttpFunctionsConfig, function: FunctionConfig):
        self._remote = remote
        self._function = function
        self._limit = config.max_response_bytes
        self._pauses = config.pauses(function)
        self._validator: Validator | None = (
            None if function.response_schema is None else schema_validator(function.response_schema)
        )

    async def call(self, payload: dict[str, Any]) -> Any:
        function = self._function
        headers, secrets = self._headers()
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt(payload, headers, secrets)
            except Transient as failure:
                if attempt > len(self._pauses):
                    times = f" ({attempt} attempts)" if attempt > 1 else ""
                    raise FunctionError(failure.code, f"{failure.message}{times}") from None
                pause = self._pauses[attempt - 1] * (1 + random.uniform(0, JITTER))
                _log.info(
                    "http-functions: %s attempt %d of %d failed [%s]; again in %.2fs",
                    function.id, attempt, len(self._pauses) + 1, failure.code, pause,
                )  # fmt: skip
                await asyncio.sleep(pause)

    def _headers(self) -> tuple[dict[str, str], list[str]]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        secrets: list[str] = []
        for name, template in self._function.headers.items():
            try:
                value, used = fill_header(template)
            except MissingVariable as exc:
                raise FunctionError(
                    SECRET_UNAVAILABLE, f"header {name} of {self._function.id}: {exc}"
                ) from None
            headers[name] = value
            secrets.extend([value, *used])
        return headers, secrets

    async def _attempt(self, payload: Any, headers: dict[str, str], secrets: list[str]) -> Any:
        where = self._function.where
        seconds = self._function.timeout_seconds
        client = await self._remote.client()
        try:
            async with asyncio.timeout(seconds):
                request = client.build_request(
                    "POST",
                    self._function.url,
                    json=payload,
                    headers=headers,
                    timeout=httpx2.Timeout(seconds),
                )
                response = await client.send(request, stream=True)
                try:
                    data = await _read(response.aiter_bytes(), self._limit)
                finally:
                    await response.aclose()
        except (TimeoutError, httpx2.TimeoutException):
            raise Transient(TIMEOUT, f"{where} did not answer within {seconds:g}s") from None
        except _TooLarge:
            raise FunctionError(
                TOO_LARGE, f"{where} answered more than {self._limit} bytes (max_response_bytes)"
            ) from None
        except httpx2.LocalProtocolError:
            raise FunctionError(
                INVALID_HEADER, f"the request to {where} could not be sent as valid HTTP"
            ) from None
        except httpx2.DecodingError:
            raise FunctionError(
                INVALID_RESPONSE, f"{where} answered a body whose Content-Encoding does not decode"
            ) from None
        except httpx2.RequestError as exc:  # refused, reset, closed early: worth another try
            detail = mask(one_line(str(exc) or type(exc).__name__, limit=200), secrets)
            raise Transient(
                CONNECTION_FAILED, f"the connection to {where} failed: {detail}"
            ) from None
        try:
            return interpret(response.status_code, data, where=where, validator=self._validator)
        except Transient as failure:
            raise Transient(failure.code, mask(failure.message, secrets)) from None
        except FunctionError as error:
            raise FunctionError(error.code, mask(error.message, secrets)) from None


async def _read(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    data = bytearray()
    async for chunk in chunks:
        data += chunk
        if len(data) > limit:
            raise _TooLarge
    return bytes(data)
