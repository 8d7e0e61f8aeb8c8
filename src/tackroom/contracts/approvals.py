"""The public face of the ``approvals`` worker: functions, state layout, payloads, error codes.

Other workers (the orchestrator, the CLI, a UI) import only this module and reach the worker
through its descriptors. Failures arrive as ``InvocationError`` whose ``remote_code`` is one of
the ``*_ERROR`` codes below, or ``invalid_request`` when a payload does not validate (with
pydantic's reason).

State (see ``docs/governance.md``):

- :data:`PENDING_SCOPE` ``<session_id>/<function_call_id>``: a :class:`PendingApproval`,
  written by :data:`REQUEST`, deleted once the call is decided;
- :data:`DECISIONS_SCOPE` ``<session_id>/<function_call_id>``: the :class:`DecisionRecord`,
  written **create-only** (``expected_revision=0``), so exactly one decision per call ever
  exists; the orchestrator's state trigger on this scope wakes the parked turn and reads it;
- :data:`SETTINGS_SCOPE` ``<session_id>``: the session's :class:`SessionSettings`.

A call whose policy rule names approvers (:class:`~tackroom.contracts.approvers.ApproverRules`:
roles, four eyes, a quorum) keeps them in its pending record with the principal its run acts for
(``requester``), and the partial allows of a quorum (``votes``); ``resolve`` enforces them against
the approver's verified ``principal`` (:data:`APPROVER_NOT_ALLOWED_ERROR`). Fields added for this
are left out of a payload or record while unset, so older readers read it as before.

Times are seconds since the epoch (floats), as elsewhere in tackroom.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from tackroom.contracts._base import Lenient as _Record
from tackroom.contracts._base import Strict as _Request
from tackroom.contracts.approvers import ApprovalVote, ApproverRules
from tackroom.contracts.bus import Function, Scope
from tackroom.contracts.principal import Principal

__all__ = [
    "ALLOW_FOR_SESSION",
    "ALREADY_DECIDED_ERROR",
    "APPROVER_NOT_ALLOWED_ERROR",
    "CALL_CONFLICT_ERROR",
    "CONTENTION_ERROR",
    "DECISIONS_SCOPE",
    "EXPIRED_ERROR",
    "EXPIRED_REASON",
    "EXPIRY_APPROVER",
    "GET",
    "GET_SETTINGS",
    "HISTORY_SCOPE",
    "ID_PATTERN",
    "LIST_PENDING",
    "NOT_PENDING_ERROR",
    "PENDING_SCOPE",
    "REQUEST",
    "RESOLVE",
    "SCHEMA_VERSION",
    "SETTINGS_SCOPE",
    "SET_MODE",
    "SWEEP",
    "AllowForSessionRequest",
    "ApprovalMode",
    "ApprovalRequest",
    "ApprovalRequestResponse",
    "CallRef",
    "Decision",
    "DecisionRecord",
    "GetRequest",
    "GetResponse",
    "ListPendingRequest",
    "ListPendingResponse",
    "PendingApproval",
    "ResolveRequest",
    "SessionId",
    "SessionSettings",
    "SetModeRequest",
    "SettingsRequest",
    "SweepRequest",
    "SweepResponse",
    "call_key",
]

SCHEMA_VERSION = 1

EXPIRED_REASON = "expired"
"""The ``reason`` of the ``deny`` the worker writes when a pending approval outlives its TTL."""
EXPIRY_APPROVER = "approvals:ttl"
"""The ``approver`` of an expiry decision (a person's decision names the person)."""

NOT_PENDING_ERROR = "not_pending"
"""``resolve`` of a call that has no pending approval and no decision (unknown call, typo)."""
ALREADY_DECIDED_ERROR = "already_decided"
"""``resolve`` of a call that already has a decision (another resolve or the expiry won); the
message names the decision, its approver and time. Nothing was written."""
EXPIRED_ERROR = "expired"
"""``resolve`` of a call whose approval outlived its TTL: it is denied with reason ``expired``
(that expiry is the only write), the caller's decision is not recorded."""
CALL_CONFLICT_ERROR = "call_conflict"
"""``request`` for a call id already used by a different call (another function, other arguments
or another run) in the session: nothing is written, the call must not run."""
CONTENTION_ERROR = "contention"
"""A settings write lost its compare-and-set too many times in a row; safe to retry."""
APPROVER_NOT_ALLOWED_ERROR = "approver_not_allowed"
"""``resolve`` by an approver the call's approver rules refuse: a role it lacks (the message names
the roles needed), the requester's own allow under four eyes, or no verified ``principal`` at all.
Nothing was written; the call stays pending. (An approver of another tenant gets
:data:`NOT_PENDING_ERROR`, exactly as for an unknown call.)"""

ID_PATTERN = r"^[!-.0-~]{1,200}$"
"""Session and call ids: 1 to 200 printable ASCII characters but space and ``/`` (they are parts
of state keys, ``/`` separates them)."""

SessionId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
CallId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Decision = Literal["allow", "deny", "aborted"]
ApprovalMode = Literal["manual", "auto", "full"]
"""``manual``: every call that needs approval waits for a person; ``auto``: calls matching the
session's ``always_allow`` globs run at once, the rest wait; ``full``: everything runs at once.
In every mode a function allowed "for the rest of the session" runs at once."""


def _unset(value: object) -> bool:
    """Left out of a dump while unset: a payload or record without the feature stays as it was."""
    return value is None or value == [] or value == ()


def call_key(session_id: str, function_call_id: str) -> str:
    """The state key of one call in ``approval-pending`` and ``approvals``."""
    return f"{session_id}/{function_call_id}"


# -- records ---------------------------------------------------------------------------------


class PendingApproval(_Record):
    """``approval-pending/<session_id>/<function_call_id>``: a call waiting for a person."""

    schema_version: int = SCHEMA_VERSION
    session_id: str
    function_call_id: str
    function_id: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    run_id: str | None = None
    requested_at: float
    expires_at: float
    approvers: ApproverRules | None = Field(
        default=None, exclude_if=_unset, description="who may decide (none: anyone)"
    )
    requester: Principal | None = Field(
        default=None, exclude_if=_unset, description="the principal the call's run acts for"
    )
    votes: list[ApprovalVote] = Field(
        default_factory=list, exclude_if=_unset, description="a quorum's allows so far"
    )


class DecisionRecord(_Record):
    """``approvals/<session_id>/<function_call_id>``: the one decision of a call (audit trail).

    ``decision``, ``reason``, ``approver`` and ``decided_at`` are the governance contract; the
    approvals worker also copies what was decided on (``function_id``, ``arguments``, ``run_id``,
    ``requested_at``) from the pending record, which it deletes. A decision written by another
    writer may lack those, so they default to ``None``.

    ``approver_principal`` is the deciding approver as the resolve's caller verified it;
    ``requester``, ``approvers`` and ``votes`` are the pending record's. As the answer of a
    ``resolve`` that counted an allow towards a quorum not yet reached, ``status`` is
    ``pending`` (nothing is decided: the call still waits), with ``approvals_so_far`` of
    ``needed``; such an answer is never stored as the decision.
    """

    schema_version: int = SCHEMA_VERSION
    decision: Decision
    reason: str | None = None
    approver: str | None = None
    decided_at: float | None = None
    session_id: str | None = None
    function_call_id: str | None = None
    function_id: str | None = None
    arguments: dict[str, Any] | None = None
    run_id: str | None = None
    requested_at: float | None = None
    approver_principal: Principal | None = Field(default=None, exclude_if=_unset)
    requester: Principal | None = Field(default=None, exclude_if=_unset)
    approvers: ApproverRules | None = Field(default=None, exclude_if=_unset)
    votes: list[ApprovalVote] = Field(default_factory=list, exclude_if=_unset)
    status: Literal["decided", "pending"] = Field(
        default="decided",
        exclude_if=lambda value: value == "decided",
        description="pending: an allow counted towards a quorum; the call still waits",
    )
    approvals_so_far: int | None = Field(default=None, exclude_if=_unset)
    needed: int | None = Field(default=None, exclude_if=_unset)


class SessionSettings(_Record):
    """``approval-settings/<session_id>``; absent: the worker's configured defaults."""

    schema_version: int = SCHEMA_VERSION
    session_id: str
    mode: ApprovalMode
    always_allow: list[str] = Field(
        default_factory=list, description="globs (`*` only) of function ids `auto` mode allows"
    )
    allowed_functions: list[str] = Field(
        default_factory=list, description="function ids allowed for the rest of the session"
    )
    updated_at: float | None = None


# -- approval::request -------------------------------------------------------------------------


class ApprovalRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    session_id: SessionId
    function_call_id: CallId
    function_id: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    reason: str = Field(default="", description="why the call needs approval (from the policy)")
    run_id: str | None = None
    approvers: ApproverRules | None = Field(
        default=None,
        exclude_if=_unset,
        description="who may decide (the policy rule's approvers); with any, the session's mode"
        " never allows the call at once",
    )
    requester: Principal | None = Field(
        default=None, exclude_if=_unset, description="the principal the call's run acts for"
    )


class ApprovalRequestResponse(_Record):
    schema_version: int = SCHEMA_VERSION
    status: Literal["allowed", "pending"]
    reason: str
    expires_at: float | None = Field(default=None, description="when pending: the deadline")


# -- approval::resolve / get / list_pending --------------------------------------------------


class ResolveRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    session_id: SessionId
    function_call_id: CallId
    decision: Decision
    reason: str | None = None
    approver: str | None = Field(
        default=None,
        max_length=200,
        description="who decided, as a name (with a principal: its id is recorded instead)",
    )
    principal: Principal | None = Field(
        default=None,
        exclude_if=_unset,
        description="the approver as the caller verified it (the gateway's authenticated"
        " principal, a local caller's own); required by a call with approver rules",
    )


class GetRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    session_id: SessionId
    function_call_id: CallId


class GetResponse(_Record):
    schema_version: int = SCHEMA_VERSION
    pending: PendingApproval | None = None
    decision: DecisionRecord | None = None


class ListPendingRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    session_id: SessionId | None = None


class ListPendingResponse(_Record):
    schema_version: int = SCHEMA_VERSION
    pending: list[PendingApproval]


# -- settings ----------------------------------------------------------------------------------


class SetModeRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    session_id: SessionId
    mode: ApprovalMode
    always_allow: list[str] | None = Field(
        default=None, description="replaces the session's globs; absent: kept"
    )


class AllowForSessionRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    session_id: SessionId
    function_id: str = Field(min_length=1)


class SettingsRequest(_Request):
    schema_version: int = SCHEMA_VERSION
    session_id: SessionId


# -- approval::sweep ---------------------------------------------------------------------------


class SweepRequest(_Record):
    """Empty when called directly; the cron trigger's ``{schedule, fired_at}`` is ignored."""


class CallRef(_Record):
    session_id: str
    function_call_id: str


class SweepResponse(_Record):
    schema_version: int = SCHEMA_VERSION
    expired: list[CallRef] = Field(default_factory=list)


# -- the state ---------------------------------------------------------------------------------

PENDING_SCOPE: Scope[PendingApproval] = Scope("approval-pending", PendingApproval)
DECISIONS_SCOPE: Scope[DecisionRecord] = Scope("approvals", DecisionRecord)
"""Read by the orchestrator (its state trigger on this scope wakes a parked turn)."""
SETTINGS_SCOPE: Scope[SessionSettings] = Scope("approval-settings", SessionSettings)
HISTORY_SCOPE: Scope[dict[str, Any]] = Scope("approval-history", dict[str, Any])
"""Records of earlier runs that reused a call id: ``<session>/<call>/<scope>/<revision>``."""

# -- the functions -----------------------------------------------------------------------------

REQUEST: Function[ApprovalRequest, ApprovalRequestResponse] = Function(
    "approval::request",
    ApprovalRequest,
    ApprovalRequestResponse,
    description="A call needs approval: allowed at once by the session's mode, or recorded "
    "pending.",
)
"""The orchestrator calls it under its configured ``approvals_function`` id (``.at(id)``)."""
RESOLVE: Function[ResolveRequest, DecisionRecord] = Function(
    "approval::resolve",
    ResolveRequest,
    DecisionRecord,
    description="Decide a pending call (allow, deny, aborted); not_pending / already_decided /"
    " approver_not_allowed else.",
)
LIST_PENDING: Function[ListPendingRequest, ListPendingResponse] = Function(
    "approval::list_pending",
    ListPendingRequest,
    ListPendingResponse,
    description="The calls waiting for approval (of one session, or all), oldest first.",
)
GET: Function[GetRequest, GetResponse] = Function(
    "approval::get",
    GetRequest,
    GetResponse,
    description="A call's pending record and its decision (with approver and time).",
)
SET_MODE: Function[SetModeRequest, SessionSettings] = Function(
    "approval::set_mode",
    SetModeRequest,
    SessionSettings,
    description="Set a session's approval mode (manual, auto, full) and auto's always_allow globs.",
)
ALLOW_FOR_SESSION: Function[AllowForSessionRequest, SessionSettings] = Function(
    "approval::allow_for_session",
    AllowForSessionRequest,
    SessionSettings,
    description="Allow a function for the rest of the session.",
)
GET_SETTINGS: Function[SettingsRequest, SessionSettings] = Function(
    "approval::get_settings",
    SettingsRequest,
    SessionSettings,
    description="A session's approval settings (the defaults if none were set).",
)
SWEEP: Function[SweepRequest, SweepResponse] = Function(
    "approval::sweep",
    SweepRequest,
    SweepResponse,
    description="Deny the pending approvals past their deadline (run by cron).",
    hop=True,  # every few seconds: a sweep that finds nothing makes no trace (a denial does)
)
