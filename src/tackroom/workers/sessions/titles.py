"""Session titles: one line naming a session, from its first prompt or set by a person.

The first user message appended to a session titles it (its first line, cut at
:data:`~tackroom.contracts.sessions.TITLE_CHARS`: :func:`~tackroom.workers.sessions.records.
title_from`, applied by the append), unless it has a title already;
``session-tree::set_title`` sets one (a person renaming it), which later prompts keep. The title
lives in the session's metadata, written by compare-and-set like a pin.
"""

from __future__ import annotations

from tackroom.contracts.sessions import SessionInfo, SetTitleRequest
from tackroom.engine.errors import FunctionError
from tackroom.workers.sessions.metadata import change_meta
from tackroom.workers.sessions.records import SessionMeta, one_line
from tackroom.workers.sessions.store import SessionStore

__all__ = ["Titles"]


class Titles:
    def __init__(self, store: SessionStore, *, max_attempts: int) -> None:
        self._store = store
        self._max_attempts = max_attempts

    async def set_title(self, request: SetTitleRequest) -> SessionInfo:
        title = one_line(request.title)
        if not title:
            raise FunctionError("invalid_request", "title: it is blank; give a line of text")

        async def retitle(meta: SessionMeta) -> SessionMeta | None:
            return None if meta.title == title else meta.model_copy(update={"title": title})

        meta = await change_meta(
            self._store,
            request.session_id,
            retitle,
            max_attempts=self._max_attempts,
            what="set_title",
        )
        return meta.info()
