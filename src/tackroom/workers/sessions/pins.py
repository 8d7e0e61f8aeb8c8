"""Pinned entries: the session's list of entry ids every context carries whole.

The list lives in the session's metadata, changed by compare-and-set like an append, so a pin
and an append racing each other both land. Pinning what is pinned, or unpinning what is not,
writes nothing.
"""

from __future__ import annotations

from tackroom.contracts.context import PINNED_RULE_TYPE
from tackroom.contracts.messages import AssistantMessage, CustomMessage, TextBlock, UserMessage
from tackroom.contracts.sessions import (
    ENTRY_NOT_FOUND_ERROR,
    NOT_PINNABLE_ERROR,
    PinRequest,
    PinResponse,
    SessionEntry,
    UnpinRequest,
)
from tackroom.engine.errors import FunctionError
from tackroom.workers.sessions.metadata import change_meta
from tackroom.workers.sessions.records import SessionMeta
from tackroom.workers.sessions.store import SessionStore

__all__ = ["Pins"]


class Pins:
    def __init__(self, store: SessionStore, *, max_attempts: int) -> None:
        self._store = store
        self._max_attempts = max_attempts

    async def pin(self, request: PinRequest) -> PinResponse:
        if request.entry_id is None and request.text is None:
            raise FunctionError(
                "invalid_request", "name the entry_id to pin, or give a rule's text"
            )
        if request.text is not None and not request.text.strip():
            raise FunctionError("invalid_request", "the rule's text is blank")
        entry_id = request.entry_id
        if request.text is not None:
            rule = CustomMessage(
                custom_type=PINNED_RULE_TYPE, content=[TextBlock(text=request.text)]
            )
            [result] = await self._store.append(request.session_id, [(entry_id, rule)])
            entry_id = result.entry.entry_id
        assert entry_id is not None
        return await self._change(request.session_id, entry_id, pin=True)

    async def unpin(self, request: UnpinRequest) -> PinResponse:
        return await self._change(request.session_id, request.entry_id, pin=False)

    async def _change(self, session_id: str, entry_id: str, *, pin: bool) -> PinResponse:
        async def repin(meta: SessionMeta) -> SessionMeta | None:
            if pin and entry_id not in meta.pinned:
                entry = await self._store.locate(meta, entry_id)
                if entry is None:
                    raise FunctionError(
                        ENTRY_NOT_FOUND_ERROR,
                        f"entry {entry_id!r} is not in the history of session {session_id!r}",
                    )
                _check_pinnable(entry)
                return meta.model_copy(update={"pinned": [*meta.pinned, entry_id]})
            if not pin and entry_id in meta.pinned:
                pinned = [e for e in meta.pinned if e != entry_id]
                return meta.model_copy(update={"pinned": pinned})
            return None

        what = "pin" if pin else "unpin"
        meta = await change_meta(
            self._store, session_id, repin, max_attempts=self._max_attempts, what=what
        )
        return PinResponse(session_id=session_id, entry_id=entry_id, pinned=meta.pinned)


def _check_pinnable(entry: SessionEntry) -> None:
    message = entry.message
    if entry.type == "compaction":
        raise FunctionError(NOT_PINNABLE_ERROR, f"entry {entry.entry_id!r} is a compaction summary")
    if isinstance(message, UserMessage | CustomMessage):
        return
    if isinstance(message, AssistantMessage) and not message.function_calls():
        return
    raise FunctionError(
        NOT_PINNABLE_ERROR,
        f"entry {entry.entry_id!r} is a {message.role} message with tool calls or results: pin"
        " a user message, a note or an answer in text (a call and its result travel together)",
    )
