"""``harness.sessions``: what a program does to sessions besides running them — list and read
them, fork and delete them, pin and unpin entries, compact one now.

A worker's refusal a caller can act on (no such session or entry, an entry that cannot be
pinned, a blank rule) becomes a :class:`UsageError` with the worker's own one-line reason.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal, Protocol

from pydantic import ValidationError

from tackroom.contracts.bus import Caller
from tackroom.contracts.context import CompactResponse, ContextSettings
from tackroom.contracts.principal import Principal
from tackroom.contracts.sessions import (
    DELETE,
    ENTRY_NOT_FOUND_ERROR,
    FORK,
    GET,
    LIST,
    MESSAGES,
    NOT_PINNABLE_ERROR,
    PIN,
    SESSION_NOT_FOUND_ERROR,
    TREE,
    UNPIN,
    DeleteRequest,
    DeleteResponse,
    ForkRequest,
    GetRequest,
    ListRequest,
    ListResponse,
    MessagesRequest,
    MessagesResponse,
    PinRequest,
    SessionInfo,
    TreeRequest,
    TreeResponse,
    UnpinRequest,
)
from tackroom.engine.errors import InvocationError
from tackroom.harness.decisions import user_name
from tackroom.harness.errors import UsageError
from tackroom.kit.compacting import compact_now
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.typed import describe_validation_error

__all__ = ["Sessions", "compact_session", "pin_entry", "unpin_entry", "usage_errors"]

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


class SessionsHost(Protocol):
    """What :class:`Sessions` needs of its harness (``Harness`` is one)."""

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def principal(self) -> Principal | None: ...

    @property
    def context(self) -> ContextSettings | None: ...

    @property
    def config(self) -> HarnessConfig: ...

    @property
    def bus(self) -> Caller: ...

    async def start(self) -> None: ...


class Sessions:
    """``harness.sessions``: the sessions of the harness's engine. Each call starts the harness
    if it has not started; an unknown session or entry raises :class:`UsageError` in one line.

    ``list``, ``get``, ``messages`` and ``tree`` read; ``fork`` branches a session at an entry,
    ``delete`` removes one (the audit log records who asked); ``pin``/``unpin`` keep an entry
    whole in every later context, ``compact`` summarises the oldest part now."""

    def __init__(self, harness: SessionsHost) -> None:
        self._harness = harness

    async def _bus(self) -> Caller:
        await self._harness.start()
        return self._harness.bus

    async def list(
        self, *, limit: int = 50, cursor: str | None = None, order: Literal["asc", "desc"] = "desc"
    ) -> ListResponse:
        """A page of sessions, newest first (``order="asc"``: oldest); pass ``next_cursor``
        back as ``cursor`` for the next page."""
        async with usage_errors():
            request = ListRequest(limit=limit, cursor=cursor, order=order)
            return await LIST.call(await self._bus(), request)

    async def get(self, session: str) -> SessionInfo:
        """The session's record: when it was made, its entry count, leaf, pins, origin."""
        async with usage_errors():
            request = GetRequest(session_id=session)
            return await GET.call(await self._bus(), request)

    async def messages(self, session: str, *, leaf_id: str | None = None) -> MessagesResponse:
        """The messages on the session's active path (or up to ``leaf_id``), root first."""
        async with usage_errors():
            request = MessagesRequest(session_id=session, leaf_id=leaf_id)
            return await MESSAGES.call(await self._bus(), request)

    async def tree(self, session: str) -> TreeResponse:
        """Every entry of the session as a tree: its branches, and where the active leaf is."""
        async with usage_errors():
            request = TreeRequest(session_id=session)
            return await TREE.call(await self._bus(), request)

    async def fork(
        self,
        session: str,
        entry_id: str,
        *,
        new_id: str | None = None,
        display_name: str | None = None,
    ) -> SessionInfo:
        """A new session sharing ``session``'s history up to ``entry_id`` (named ``new_id`` when
        given); a run on it continues from there, and the source is unchanged."""
        async with usage_errors():
            request = ForkRequest(
                source_session_id=session,
                from_entry_id=entry_id,
                session_id=new_id,
                display_name=display_name,
            )
            return await FORK.call(await self._bus(), request)

    async def delete(self, session: str, *, requested_by: str | None = None) -> DeleteResponse:
        """Delete the session: its own entries and inboxes (history a fork shares stays with the
        session holding it). ``requested_by`` (default: the harness's principal, else the OS
        user) is named in the audit log."""
        principal = self._harness.principal
        who = requested_by or (principal.id if principal is not None else user_name())
        async with usage_errors():
            request = DeleteRequest(session_id=session, requested_by=who)
            return await DELETE.call(await self._bus(), request)

    async def pin(
        self, session: str, entry_id: str | None = None, *, text: str | None = None
    ) -> str:
        """Pin an entry of ``session`` (or ``text`` as a new rule entry, whose id is ``entry_id``
        when given): every later context carries it verbatim, whatever compaction summarises.
        Returns the pinned entry's id."""
        return await pin_entry(await self._bus(), session, entry_id, text=text)

    async def unpin(self, session: str, entry_id: str) -> builtins.list[str]:
        """Unpin ``entry_id`` (nothing changes if it is not pinned); the ids still pinned."""
        return await unpin_entry(await self._bus(), session, entry_id)

    async def compact(self, session: str) -> CompactResponse:
        """Summarise the oldest part of ``session`` now, with the harness's model, into a
        compaction entry naming what it replaces (pinned entries and the newest ``keep_last``
        stay whole). ``compacted`` is false, ``detail`` says why, when nothing can be."""
        bus, harness = await self._bus(), self._harness
        return await compact_session(
            bus,
            session,
            provider=harness.provider,
            model=harness.model,
            settings=harness.context or harness.config.agent.context,
            principal=harness.principal,
        )
