"""What the facade does to a session besides running it: pin and unpin entries, compact it now.

A worker's refusal a caller can act on (no such session or entry, an entry that cannot be
pinned, a blank rule) becomes a :class:`UsageError` with the worker's own one-line reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import ValidationError

from tackroom.contracts.bus import Caller
from tackroom.contracts.context import CompactResponse, ContextSettings
from tackroom.contracts.principal import Principal
from tackroom.contracts.sessions import (
    ENTRY_NOT_FOUND_ERROR,
    NOT_PINNABLE_ERROR,
    PIN,
    SESSION_NOT_FOUND_ERROR,
    UNPIN,
    PinRequest,
    UnpinRequest,
)
from tackroom.engine.errors import InvocationError
from tackroom.harness.errors import UsageError
from tackroom.kit.compacting import compact_now
from tackroom.runtime.typed import describe_validation_error

__all__ = ["compact_session", "pin_entry", "unpin_entry", "usage_errors"]

_USAGE_CODES = frozenset(
    {SESSION_NOT_FOUND_ERROR, ENTRY_NOT_FOUND_ERROR, NOT_PINNABLE_ERROR, "invalid_request"}
)


@asynccontextmanager
async def usage_errors() -> AsyncIterator[None]:
    """Turn a refusal of the sessions worker a caller can act on into a :class:`UsageError`."""
    try:
        yield
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc)) from None
    except InvocationError as exc:
        if exc.remote_code in _USAGE_CODES:
            raise UsageError(" ".join(exc.message.split())) from None
        raise


async def pin_entry(bus: Caller, session_id: str, entry_id: str | None, *, text: str | None) -> str:
    """Pin ``entry_id``, or ``text`` as a new rule entry (whose id is ``entry_id`` when both are
    given: a retry stores the rule once); the pinned entry's id."""
    if entry_id is None and text is None:
        raise UsageError("name the entry_id to pin, or give a rule's text=")
    async with usage_errors():
        request = PinRequest(session_id=session_id, entry_id=entry_id, text=text)
        reply = await PIN.call(bus, request)
    return reply.entry_id


async def unpin_entry(bus: Caller, session_id: str, entry_id: str) -> list[str]:
    """Unpin ``entry_id`` (nothing changes when it is not pinned); the ids still pinned."""
    async with usage_errors():
        reply = await UNPIN.call(bus, UnpinRequest(session_id=session_id, entry_id=entry_id))
    return reply.pinned


async def compact_session(
    bus: Caller,
    session_id: str,
    *,
    provider: str,
    model: str,
    settings: ContextSettings | None,
    principal: Principal | None,
) -> CompactResponse:
    """Summarise the oldest part of ``session_id`` now (see :func:`tackroom.kit.compacting.
    compact_now`); ``compacted`` is false, with ``detail`` saying why, when there is nothing to
    summarise."""
    async with usage_errors():
        return await compact_now(
            bus,
            session_id=session_id,
            provider=provider,
            model=model,
            settings=settings or ContextSettings(),
            principal=principal,
        )
