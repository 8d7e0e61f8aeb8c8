"""The session list index: paging by creation time without reading any entry.

Each session has one index key ``YYYYMMDD/created_us-sid`` (written once, at creation) and each
day that has sessions one key in a day directory. A page lists the day directory, then one day
of index keys at a time from the cursor, and reads the metadata of only the sessions it returns.
The cursor is the last index key returned; keys never move, so pages stay stable while sessions
are appended to.
"""

from __future__ import annotations

import re
from typing import Literal

from tackroom.contracts.sessions import INVALID_CURSOR_ERROR
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import StateBackend
from tackroom.workers.sessions.records import (
    DAYS_SCOPE,
    INDEX_SCOPE,
    SESSIONS_SCOPE,
    DayRecord,
    IndexRecord,
    SessionMeta,
)

__all__ = ["SessionIndex"]

_CURSOR = re.compile(r"^\d{8}/\d{17}-[!-.0-~]{1,200}$")


class SessionIndex:
    def __init__(self, backend: StateBackend) -> None:
        self._backend = backend

    async def add(self, meta: SessionMeta) -> None:
        """Write the session's index key and its day's key.

        The day's key is the same value whoever writes it: it is written each time, without a
        compare-and-set (in a unit of work one lost at the commit would fail the whole creation
        of a day's first sessions but one), and every creation makes the same writes.
        """
        record = IndexRecord(session_id=meta.session_id)
        await self._backend.set_state(INDEX_SCOPE, meta.index_key, record.model_dump(mode="json"))
        day = meta.index_key.partition("/")[0]
        await self._backend.set_state(DAYS_SCOPE, day, DayRecord().model_dump(mode="json"))

    async def remove(self, key: str) -> None:
        await self._backend.delete_state(INDEX_SCOPE, key)

    async def page(
        self, *, limit: int, cursor: str | None, order: Literal["asc", "desc"]
    ) -> tuple[list[SessionMeta], str | None]:
        """Up to ``limit`` sessions after ``cursor``, and the cursor of the next page (or None).

        Index keys that no session claims (a creation that died half-way, or lost a race for
        its id) are skipped.
        """
        if cursor is not None and not _CURSOR.match(cursor):
            raise FunctionError(INVALID_CURSOR_ERROR, f"not a session list cursor: {cursor!r}")
        descending = order == "desc"
        days = sorted(item.key for item in await self._backend.list_state(DAYS_SCOPE))
        if descending:
            days.reverse()
        if cursor is not None:
            cursor_day = cursor[:8]
            days = [d for d in days if (d <= cursor_day if descending else d >= cursor_day)]
        found: list[SessionMeta] = []
        for day in days:
            keys = await self._backend.list_state(INDEX_SCOPE, prefix=f"{day}/")
            if descending:
                keys.reverse()
            if cursor is not None:
                keys = [k for k in keys if (k.key < cursor if descending else k.key > cursor)]
            for item in keys:
                if len(found) == limit:
                    return found, found[-1].index_key
                record = IndexRecord.model_validate(item.value)
                stored = await self._backend.get_state(SESSIONS_SCOPE, record.session_id)
                if stored is None:
                    continue
                meta = SessionMeta.model_validate(stored.value)
                if meta.index_key == item.key:
                    found.append(meta)
        return found, None
