"""What every SDK adapter shares: its clients, reading a stream to its stop reason, the ending.

:class:`KeyedClients` holds a profile's SDK client — its base URL, headers and timeouts, the
SDK's own retries off (``max_retries=0``: the service retries by error class) — and one copy
per key, sharing the connection pool. :func:`read_to_stop` feeds each event of an SDK stream to
the adapter and keeps the stop reason an event carries: a failure **after** it keeps the
finished answer (a cut connection before the last usage chunk), a failure before it is raised.
:func:`end_stream` then records the stop reason in the sink, or refuses the answer.

This module imports no SDK: the adapter passes its client and timeout classes in.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from tackroom.contracts.messages import StopReason
from tackroom.kit.providers.config import ProfileSettings
from tackroom.kit.providers.errors import ProviderFailure
from tackroom.kit.providers.sink import StreamSink

__all__ = ["KeyedClients", "SDKStream", "end_stream", "read_to_stop"]

_log = logging.getLogger("tackroom.providers")

EventT = TypeVar("EventT")
EventT_co = TypeVar("EventT_co", covariant=True)


class _Client(Protocol):
    def with_options(self, *, api_key: str) -> Self: ...

    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Client)


class SDKStream(Protocol[EventT_co]):
    """An SDK's streamed response: an async context manager iterating its events."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Any: ...

    def __aiter__(self) -> AsyncIterator[EventT_co]: ...


class KeyedClients(Generic[ClientT]):
    """A profile's SDK client and its copies by key; ``client`` and ``timeout`` are the SDK's
    client class and timeout class (``openai.AsyncOpenAI``, ``openai.Timeout``)."""

    def __init__(
        self,
        client: Callable[..., ClientT],
        *,
        timeout: Callable[..., Any],
        profile: ProfileSettings,
    ) -> None:
        self._base = client(
            api_key=profile.placeholder_key,
            base_url=profile.base_url,
            max_retries=0,
            timeout=timeout(profile.timeout, connect=profile.connect_timeout),
            default_headers=profile.headers or None,
        )
        self._copies: dict[str, ClientT] = {}

    def for_key(self, key: str) -> ClientT:
        copy = self._copies.get(key)
        if copy is None:
            copy = self._copies[key] = self._base.with_options(api_key=key)
        return copy

    async def aclose(self) -> None:
        await self._base.close()


async def read_to_stop(
    stream: SDKStream[EventT], on_event: Callable[[EventT], Awaitable[str | None]]
) -> str | None:
    """Every event of ``stream`` through ``on_event`` (which returns the wire's stop reason
    when the event carries one); the last stop reason seen, ``None`` if none came."""
    stop: str | None = None
    try:
        async with stream:
            async for event in stream:
                stop = await on_event(event) or stop
    except Exception:
        if stop is None:
            raise
        _log.debug("the stream failed after its stop reason; keeping the answer")
    return stop


def end_stream(
    sink: StreamSink,
    stop: str | None,
    *,
    reasons: Mapping[str, StopReason],
    refusals: Mapping[str, str],
) -> None:
    """Record the wire's stop reason (``reasons``; unknown ones are an end). ``None``: the
    stream ended early, the sink reports it. A stop reason in ``refusals`` fails the call with
    that message (a ``permanent`` failure)."""
    if stop is None:
        return
    refused = refusals.get(stop)
    if refused is not None:
        raise ProviderFailure("permanent", refused)
    sink.stop(reasons.get(stop, "end"))
