"""Forgetting a deleted session: the notification every owner of session-derived data acts on.

``session-tree::delete`` appends a :class:`SessionDeleted` to :data:`SESSION_DELETED` (group =
session id) once the session is gone. Each worker that keeps data derived from a session (the
orchestrator's turn records, ledger and events; approvals; traces; workspaces) registers a stream
trigger on that stream for its own ``<worker>::forget_session`` function (:func:`forgetter`), so
the engine delivers every notification through its durable trigger queue, retried until the
handler succeeds. Handlers are idempotent: a redelivery deletes nothing more.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.bus import Function, Stream

__all__ = [
    "SESSION_DELETED",
    "Forgotten",
    "SessionDeleted",
    "SessionDeletedTrigger",
    "forgetter",
]

SCHEMA_VERSION = 1


class SessionDeleted(BaseModel):
    """A session was deleted: owners delete what they derived from it."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    schema_version: int = SCHEMA_VERSION
    session_id: str = Field(pattern=r"^[!-.0-~]{1,200}$")
    requested_by: str | None = None
    at: float


SESSION_DELETED: Stream[SessionDeleted] = Stream("session-tree::deleted", SessionDeleted)
"""One record per deletion, grouped by session id."""


class SessionDeletedTrigger(BaseModel):
    """What a stream trigger on :data:`SESSION_DELETED` delivers to a forgetter."""

    model_config = ConfigDict(extra="ignore", defer_build=True)
    stream: str
    group_id: str
    seq: int
    data: SessionDeleted


class Forgotten(BaseModel):
    """What one owner deleted (counts of keys, records, spans or files; 0 on a redelivery)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    schema_version: int = SCHEMA_VERSION
    session_id: str
    deleted: dict[str, int] = Field(default_factory=dict)


def forgetter(worker: str) -> Function[SessionDeletedTrigger, Forgotten]:
    """The function ``worker`` serves to forget a deleted session: ``<worker>::forget_session``."""
    return Function(
        f"{worker}::forget_session",
        SessionDeletedTrigger,
        Forgotten,
        description=f"Delete what the {worker} worker keeps of a deleted session (idempotent; "
        "called by a durable stream trigger on session-tree::deleted).",
    )
