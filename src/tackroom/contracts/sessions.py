"""The public face of the ``sessions`` worker: its functions, payload models and error codes.

Other workers import only this module and call through its descriptors
(``await MESSAGES.call(bus, MessagesRequest(session_id=...))``); failures arrive as
``InvocationError`` whose ``remote_code`` is one of the ``*_ERROR`` codes below (or
``invalid_request`` when a payload does not validate, with pydantic's reason).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function
from tackroom.contracts.forgetting import SESSION_DELETED, SessionDeleted
from tackroom.contracts.messages import AgentMessage
from tackroom.contracts.principal import Principal

__all__ = [
    "APPEND",
    "APPEND_BATCH",
    "BROKEN_HISTORY_ERROR",
    "CLONE",
    "CONTENTION_ERROR",
    "CREATE",
    "DELETE",
    "ENSURE",
    "ENTRY_NOT_FOUND_ERROR",
    "FORK",
    "GET",
    "ID_PATTERN",
    "INBOX_DRAIN",
    "INBOX_PEEK",
    "INBOX_PUSH",
    "INBOX_REMOVE",
    "INVALID_CURSOR_ERROR",
    "LIST",
    "MAX_BATCH",
    "MESSAGES",
    "NOT_PINNABLE_ERROR",
    "PIN",
    "SCHEMA_VERSION",
    "SESSION_DELETED",
    "SESSION_EXISTS_ERROR",
    "SESSION_NOT_FOUND_ERROR",
    "SESSION_SHARED_ERROR",
    "SET_TITLE",
    "TITLE_CHARS",
    "TREE",
    "UNPIN",
    "AppendBatchRequest",
    "AppendBatchResponse",
    "AppendRequest",
    "AppendResult",
    "BatchItem",
    "CloneRequest",
    "CreateRequest",
    "DeleteRequest",
    "DeleteResponse",
    "EnsureRequest",
    "EnsureResponse",
    "EntryId",
    "EntryType",
    "ForkRequest",
    "GetRequest",
    "InboxItems",
    "InboxName",
    "InboxPushRequest",
    "InboxPushResponse",
    "InboxRemoveRequest",
    "InboxRemoveResponse",
    "InboxRequest",
    "ListRequest",
    "ListResponse",
    "MessagesRequest",
    "MessagesResponse",
    "Origin",
    "PathMessage",
    "PinRequest",
    "PinResponse",
    "SessionDeleted",
    "SessionEntry",
    "SessionId",
    "SessionInfo",
    "SetTitleRequest",
    "TreeNode",
    "TreeRequest",
    "TreeResponse",
    "UnpinRequest",
]

SCHEMA_VERSION = 1

SESSION_NOT_FOUND_ERROR = "session_not_found"
"""No session has the id given (``session_id`` or ``source_session_id``)."""
SESSION_EXISTS_ERROR = "session_exists"
"""``create`` was given a ``session_id`` that is taken (``ensure`` is the idempotent form)."""
ENTRY_NOT_FOUND_ERROR = "entry_not_found"
"""A ``parent_id``, ``leaf_id`` or ``from_entry_id`` is not in the session's visible history."""
INVALID_CURSOR_ERROR = "invalid_cursor"
"""A ``list`` cursor that this worker did not hand out."""
BROKEN_HISTORY_ERROR = "broken_history"
"""Stored history points at an entry that is not stored (the state was edited by hand)."""
CONTENTION_ERROR = "contention"
"""A write lost its compare-and-set too many times in a row; safe to retry (it wrote nothing)."""
SESSION_SHARED_ERROR = "session_shared"
NOT_PINNABLE_ERROR = "not_pinnable"
"""Only user messages, notes (``custom``) and assistant text without tool calls can be pinned:
a tool call and its result travel together."""
"""``delete`` of a session whose history other sessions share (forks or clones of it, or the
session holding their leaf): delete those first, or delete with ``cascade``."""

ID_PATTERN = r"^[!-.0-~]{1,200}$"
"""Session and entry ids: 1 to 200 printable ASCII characters but space and ``/`` (ids are parts
of state keys, ``/`` separates them)."""
MAX_BATCH = 256
TITLE_CHARS = 60
"""A title set from a session's first prompt: its first line, at most this many characters."""

SessionId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
EntryId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
InboxName = Annotated[str, StringConstraints(pattern=r"^[!-.0-~]{1,64}$")]

EntryType = Literal["message", "custom", "compaction"]
"""``custom`` for a ``CustomMessage``, ``message`` for the others; ``compaction`` is reserved for
the compaction worker (its summary rides in a ``CustomMessage``)."""


# -- records ---------------------------------------------------------------------------------


class SessionEntry(_Model):
    """One node of a session tree, stored as its own state value.

    ``parent_session_id`` is set only when the parent lives in another session: the first
    entries of a fork or clone hang off an entry of the history they share.
    """

    schema_version: int = SCHEMA_VERSION
    entry_id: str
    session_id: str
    parent_id: str | None
    parent_session_id: str | None = None
    seq: int = Field(description="1, 2, 3... in append order within the session")
    type: EntryType
    message: AgentMessage
    timestamp: float = Field(description="when the worker stored it (seconds since the epoch)")
    principal: Principal | None = Field(
        default=None, description="who the run that wrote it acted for (none: a local write)"
    )


class Origin(_Model):
    """Where a fork or clone shares history: ``from_entry_id`` of ``source_session_id``.

    ``base_session_id`` is the session actually holding that entry (the source itself, or one of
    the source's own ancestors when the fork point is in history the source shares).
    """

    kind: Literal["fork", "clone"]
    source_session_id: str
    from_entry_id: str | None
    base_session_id: str | None


class SessionInfo(_Model):
    schema_version: int = SCHEMA_VERSION
    session_id: str
    created_at: float
    updated_at: float
    display_name: str | None = None
    cwd: str | None = None
    entry_count: int = Field(description="entries stored in this session (not shared history)")
    leaf_id: str | None = Field(description="the active leaf: where an append chains by default")
    leaf_session_id: str | None = Field(
        description="the session holding the leaf (a fork's source until its first append)"
    )
    origin: Origin | None = None
    last_message_preview: str | None = None
    pinned: list[str] = Field(
        default_factory=list, description="entry ids carried whole into every context, in pin order"
    )
    title: str | None = Field(
        default=None,
        description="one line naming the session: its first prompt's (cut at TITLE_CHARS), or"
        " the one set_title gave (none: no prompt yet)",
    )


# -- session-tree::* -------------------------------------------------------------------------


class CreateRequest(_Model):
    session_id: SessionId | None = None
    display_name: str | None = None
    cwd: str | None = None


class EnsureRequest(_Model):
    session_id: SessionId
    display_name: str | None = None
    cwd: str | None = None


class EnsureResponse(_Model):
    session: SessionInfo
    created: bool


class GetRequest(_Model):
    session_id: SessionId


class AppendRequest(_Model):
    session_id: SessionId
    entry_id: EntryId | None = Field(
        default=None, description="idempotency key: appending an id twice stores it once"
    )
    parent_id: EntryId | None = Field(
        default=None, description="absent: chain to the active leaf; an older entry: branch"
    )
    message: AgentMessage
    principal: Principal | None = Field(default=None, description="stored with the entry")


class AppendResult(_Model):
    entry: SessionEntry
    created: bool = Field(description="false when the entry id was already stored")


class BatchItem(_Model):
    entry_id: EntryId | None = None
    message: AgentMessage


class AppendBatchRequest(_Model):
    session_id: SessionId
    parent_id: EntryId | None = None
    entries: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH)
    principal: Principal | None = Field(default=None, description="stored with each entry")


class AppendBatchResponse(_Model):
    results: list[AppendResult]


class MessagesRequest(_Model):
    session_id: SessionId
    leaf_id: EntryId | None = Field(default=None, description="default: the active leaf")
    since_entry_id: EntryId | None = Field(
        default=None,
        description="only the entries after this one on the active path (a reader's cursor); "
        "when it is not on the path, the whole path comes back with partial=false",
    )


class PathMessage(_Model):
    entry_id: str
    type: EntryType
    message: AgentMessage


class MessagesResponse(_Model):
    session_id: str
    leaf_id: str | None
    messages: list[PathMessage] = Field(description="root to leaf, shared history included")
    partial: bool = Field(
        default=False, description="true: only the entries after since_entry_id are listed"
    )
    pinned: list[str] = Field(
        default_factory=list,
        description="the session's pinned entry ids (some may be off this path: a fork's own)",
    )


class PinRequest(_Model):
    """Pin ``entry_id``, or append ``text`` as a rule entry (id ``entry_id`` when given, so a
    retry stores it once) and pin that."""

    session_id: SessionId
    entry_id: EntryId | None = None
    text: str | None = Field(default=None, min_length=1, max_length=20_000)


class UnpinRequest(_Model):
    session_id: SessionId
    entry_id: EntryId


class PinResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    session_id: str
    entry_id: str
    pinned: list[str] = Field(description="the session's pinned entry ids after the change")


class ForkRequest(_Model):
    source_session_id: SessionId
    from_entry_id: EntryId
    session_id: SessionId | None = None
    display_name: str | None = None
    cwd: str | None = None


class CloneRequest(_Model):
    source_session_id: SessionId
    session_id: SessionId | None = None
    display_name: str | None = None
    cwd: str | None = None


class TreeRequest(_Model):
    session_id: SessionId


class TreeNode(_Model):
    """A run of entries, each the only child of the one before; ``children`` branch off the last.

    Runs keep the nesting as deep as the branching, not as long as the session.
    """

    entries: list[SessionEntry]
    children: list[TreeNode] = Field(default_factory=list)


class TreeResponse(_Model):
    session_id: str
    leaf_id: str | None
    leaf_session_id: str | None
    roots: list[TreeNode]


class ListRequest(_Model):
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str | None = None
    order: Literal["asc", "desc"] = Field(default="desc", description="by creation time")


class ListResponse(_Model):
    sessions: list[SessionInfo]
    next_cursor: str | None = Field(description="pass back as cursor; null on the last page")


class DeleteRequest(_Model):
    session_id: SessionId
    requested_by: str | None = Field(
        default=None, max_length=200, description="who asked (named in the audit trail)"
    )
    cascade: bool = Field(
        default=False,
        description="delete the forks and clones sharing its history too (else: session_shared)",
    )


class DeleteResponse(_Model):
    """What ``delete`` removed: the session, its list entry, ``entries`` of its own (shared
    history stays with the session that holds it) and ``inboxes`` (steering, followup, ...)."""

    schema_version: int = SCHEMA_VERSION
    session_id: str
    entries: int
    inboxes: int
    cascaded: list[str] = Field(
        default_factory=list,
        description="the forks and clones deleted with it (cascade), each before its source",
    )


class SetTitleRequest(_Model):
    session_id: SessionId
    title: str = Field(
        min_length=1, max_length=200, description="one line (whitespace runs become one space)"
    )


# -- session-inbox::* ------------------------------------------------------------------------


class InboxPushRequest(_Model):
    session_id: SessionId
    name: InboxName = Field(description="the orchestrator reads 'steering' and 'followup'")
    item: AgentMessage


class InboxPushResponse(_Model):
    count: int = Field(description="items waiting in this inbox after the push")


class InboxRequest(_Model):
    session_id: SessionId
    name: InboxName


class InboxItems(_Model):
    items: list[AgentMessage]


class InboxRemoveRequest(_Model):
    session_id: SessionId
    name: InboxName
    items: list[AgentMessage] = Field(description="the items a peek returned, oldest first")


class InboxRemoveResponse(_Model):
    removed: int = Field(description="0 when the items were no longer at the head (done before)")


# -- the functions ---------------------------------------------------------------------------
# The reads and writes a turn makes are bus hops (``hop=True``): no span of their own when tracing
# keeps spans for steps; what a person or a client asks for (create, fork, delete, push, ...) is.

CREATE: Function[CreateRequest, SessionInfo] = Function(
    "session-tree::create",
    CreateRequest,
    SessionInfo,
    description="Create a session (session_exists if the given id is taken).",
)
ENSURE: Function[EnsureRequest, EnsureResponse] = Function(
    "session-tree::ensure",
    EnsureRequest,
    EnsureResponse,
    description="Get a session by id, creating it if absent.",
    hop=True,
)
GET: Function[GetRequest, SessionInfo] = Function(
    "session-tree::get", GetRequest, SessionInfo, description="A session's metadata.", hop=True
)
APPEND: Function[AppendRequest, AppendResult] = Function(
    "session-tree::append",
    AppendRequest,
    AppendResult,
    description="Append a message; idempotent by entry_id; chains to the active leaf unless "
    "parent_id.",
    hop=True,
)
APPEND_BATCH: Function[AppendBatchRequest, AppendBatchResponse] = Function(
    "session-tree::append_batch",
    AppendBatchRequest,
    AppendBatchResponse,
    description="Append messages as one chain, committed together; idempotent per entry_id.",
    hop=True,
)
MESSAGES: Function[MessagesRequest, MessagesResponse] = Function(
    "session-tree::messages",
    MessagesRequest,
    MessagesResponse,
    description="The path root to leaf (default the active leaf), shared history included.",
    hop=True,
)
FORK: Function[ForkRequest, SessionInfo] = Function(
    "session-tree::fork",
    ForkRequest,
    SessionInfo,
    description="A new session sharing the source's history up to from_entry_id (nothing copied).",
)
CLONE: Function[CloneRequest, SessionInfo] = Function(
    "session-tree::clone",
    CloneRequest,
    SessionInfo,
    description="A new session sharing the source's whole active path (nothing copied).",
)
TREE: Function[TreeRequest, TreeResponse] = Function(
    "session-tree::tree",
    TreeRequest,
    TreeResponse,
    description="Every entry of the session and its shared history, nested by branch.",
)
LIST: Function[ListRequest, ListResponse] = Function(
    "session-tree::list",
    ListRequest,
    ListResponse,
    description="A page of sessions by creation time, with a cursor for the next page.",
)
DELETE: Function[DeleteRequest, DeleteResponse] = Function(
    "session-tree::delete",
    DeleteRequest,
    DeleteResponse,
    description="Delete a session: its metadata, own entries and inboxes (session_shared while"
    " forks or clones share its history, unless cascade deletes them first), then announce each"
    " on session-tree::deleted so every worker forgets what it derived from it.",
)
SET_TITLE: Function[SetTitleRequest, SessionInfo] = Function(
    "session-tree::set_title",
    SetTitleRequest,
    SessionInfo,
    description="Set a session's title (one line; a blank one is refused).",
)
PIN: Function[PinRequest, PinResponse] = Function(
    "session-tree::pin",
    PinRequest,
    PinResponse,
    description="Pin an entry (or a new rule given as text): it is carried verbatim into every "
    "later context, whatever compaction summarises. Pinning twice changes nothing.",
)
UNPIN: Function[UnpinRequest, PinResponse] = Function(
    "session-tree::unpin",
    UnpinRequest,
    PinResponse,
    description="Unpin an entry; unpinning one that is not pinned changes nothing.",
)
INBOX_PUSH: Function[InboxPushRequest, InboxPushResponse] = Function(
    "session-inbox::push",
    InboxPushRequest,
    InboxPushResponse,
    description="Queue a message in a session's inbox (steering, followup, ...).",
)
INBOX_PEEK: Function[InboxRequest, InboxItems] = Function(
    "session-inbox::peek",
    InboxRequest,
    InboxItems,
    description="The messages waiting in an inbox.",
    hop=True,
)
INBOX_DRAIN: Function[InboxRequest, InboxItems] = Function(
    "session-inbox::drain",
    InboxRequest,
    InboxItems,
    description="Take every message waiting in an inbox, atomically.",
    hop=True,
)
INBOX_REMOVE: Function[InboxRemoveRequest, InboxRemoveResponse] = Function(
    "session-inbox::remove",
    InboxRemoveRequest,
    InboxRemoveResponse,
    description="Remove items a peek returned, if still at the head (idempotent).",
    hop=True,
)
