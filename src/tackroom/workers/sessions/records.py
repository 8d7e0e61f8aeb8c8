"""What the sessions worker persists, and where.

Scopes and keys (``sid`` a session id, ``eid`` an entry id):

- ``sessions`` / ``sid`` → :class:`SessionMeta` (one small value per session, rewritten by
  compare-and-set on every append);
- ``session-entries`` / ``sid/eid`` → :class:`SessionEntry` (written once, never rewritten);
- ``sessions-by-created`` / ``YYYYMMDD/created_us-sid`` → :class:`IndexRecord` (the list index);
- ``sessions-by-created-days`` / ``YYYYMMDD`` → :class:`DayRecord` (which index days exist);
- ``inbox`` / ``sid/name`` → ``{schema_version, items: [AgentMessage]}``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.messages import UserMessage, text_of
from tackroom.contracts.sessions import (
    SCHEMA_VERSION,
    TITLE_CHARS,
    Origin,
    SessionEntry,
    SessionInfo,
)

__all__ = [
    "DAYS_SCOPE",
    "ENTRIES_SCOPE",
    "INBOX_SCOPE",
    "INDEX_SCOPE",
    "SESSIONS_SCOPE",
    "DayRecord",
    "IndexRecord",
    "SessionMeta",
    "day_of",
    "entry_key",
    "index_key",
    "one_line",
    "session_prefix",
    "title_from",
]

SESSIONS_SCOPE = "sessions"
ENTRIES_SCOPE = "session-entries"
INDEX_SCOPE = "sessions-by-created"
DAYS_SCOPE = "sessions-by-created-days"
INBOX_SCOPE = "inbox"

_PREVIEW_CHARS = 120


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionMeta(_Record):
    """A session's metadata, plus the entries of its latest append (``pending``).

    The append that commits an entry is the compare-and-set of this record; the entry's own
    value is written just after. ``pending`` keeps the newest batch readable (and writable by
    the next append) if the writer dies in between, so a committed entry is always either in
    ``pending`` or stored, and ``pending`` never holds more than one batch.
    """

    schema_version: int = SCHEMA_VERSION
    session_id: str
    created_at: float
    updated_at: float
    display_name: str | None = None
    cwd: str | None = None
    entry_count: int = 0
    next_seq: int = 1
    leaf_id: str | None = None
    leaf_session_id: str | None = None
    origin: Origin | None = None
    index_key: str
    pending: list[SessionEntry] = Field(default_factory=list)
    preview: str | None = Field(
        default=None,
        description="the newest entry's text, cut short, when nothing is pending",
        exclude_if=lambda value: value is None,  # absent unless set: older readers still read it
    )
    pinned: list[str] = Field(
        default_factory=list, description="entry ids carried whole into every context"
    )
    title: str | None = Field(
        default=None,
        description="from the first prompt, or set (titles.py); a record without one reads so",
        exclude_if=lambda value: value is None,  # absent unless set: older readers still read it
    )

    def info(self) -> SessionInfo:
        preview = preview_of(self.pending[-1]) if self.pending else self.preview
        return SessionInfo(
            session_id=self.session_id,
            created_at=self.created_at,
            updated_at=self.updated_at,
            display_name=self.display_name,
            cwd=self.cwd,
            entry_count=self.entry_count,
            leaf_id=self.leaf_id,
            leaf_session_id=self.leaf_session_id,
            origin=self.origin,
            last_message_preview=preview,
            pinned=list(self.pinned),
            title=self.title,
        )


class IndexRecord(_Record):
    schema_version: int = SCHEMA_VERSION
    session_id: str


class DayRecord(_Record):
    schema_version: int = SCHEMA_VERSION


def entry_key(session_id: str, entry_id: str) -> str:
    return f"{session_id}/{entry_id}"


def session_prefix(session_id: str) -> str:
    return f"{session_id}/"


def day_of(created_at: float) -> str:
    return time.strftime("%Y%m%d", time.gmtime(created_at))


def index_key(session_id: str, created_at: float) -> str:
    """Sorts by creation time within a day; the day prefix lets a page list one day at a time."""
    return f"{day_of(created_at)}/{round(created_at * 1_000_000):017d}-{session_id}"


def preview_of(entry: SessionEntry) -> str | None:
    """The start of ``entry``'s text, as a session list shows it."""
    return text_of(entry.message.content).strip()[:_PREVIEW_CHARS] or None


def one_line(text: str, *, limit: int | None = None) -> str:
    """``text`` on one line (every run of whitespace one space), cut at ``limit`` with ``…``."""
    line = " ".join(text.split())
    if limit is not None and len(line) > limit:
        return line[: limit - 1].rstrip() + "…"
    return line


def title_from(entries: Sequence[SessionEntry]) -> str | None:
    """The title the first user prompt among ``entries`` gives (its first line, cut short)."""
    for entry in entries:
        if isinstance(entry.message, UserMessage):
            first = text_of(entry.message.content).strip().split("\n", 1)[0]
            line = one_line(first, limit=TITLE_CHARS)
            if line:
                return line
    return None
