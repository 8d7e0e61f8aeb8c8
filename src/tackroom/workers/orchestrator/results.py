"""``results::read``: a page of a function result the model got clipped, from the session.

Served by the orchestrator because it already keeps each active session's path (with entry ids)
and knows how results are turned into text (:mod:`.clipping`); only the calling session's
active path is searched, so a model never reads another session's entries.
"""

from __future__ import annotations

from tackroom.contracts.messages import FunctionResultMessage
from tackroom.contracts.provenance import joined
from tackroom.contracts.results import (
    ENTRY_NOT_FOUND,
    NOT_A_RESULT,
    OFFSET_OUT_OF_RANGE,
    ReadRequest,
    ReadResponse,
)
from tackroom.contracts.tools import CallContext
from tackroom.engine.errors import FunctionError
from tackroom.workers.orchestrator.clipping import page_of, result_text
from tackroom.workers.orchestrator.transcript import SessionsClient

__all__ = ["ResultsReader"]


class ResultsReader:
    def __init__(self, sessions: SessionsClient, *, page_chars: int) -> None:
        self._sessions = sessions
        self._page_chars = page_chars

    async def read(self, request: ReadRequest, call: CallContext | None) -> ReadResponse:
        if call is None:
            raise FunctionError(
                "no_call_context", "results::read is called by a run's model (no _call context)"
            )
        message = await self._result(call.session_id, request.entry_id)
        text = result_text(message)
        if request.offset > len(text):
            raise FunctionError(
                OFFSET_OUT_OF_RANGE,
                f"offset {request.offset} is past the end of the result ({len(text)} characters)",
            )
        page, next_offset = page_of(
            text, offset=request.offset, length=request.length or self._page_chars
        )
        return ReadResponse(
            entry_id=request.entry_id,
            offset=request.offset,
            text=page,
            total_chars=len(text),
            next_offset=next_offset,
            label=joined([message.label]),
        )

    async def _result(self, session_id: str, entry_id: str) -> FunctionResultMessage:
        for found_id, message in await self._sessions.path(session_id):
            if found_id != entry_id:
                continue
            if not isinstance(message, FunctionResultMessage):
                raise FunctionError(NOT_A_RESULT, f"entry {entry_id!r} is not a function result")
            return message
        raise FunctionError(
            ENTRY_NOT_FOUND,
            f"no entry {entry_id!r} in this session; use the entry_id a clip note names",
        )
