"""The audit trail (``audit::*``): an append-only, hash-chained log of security-relevant facts.

Writers hand in an :class:`AuditFact`; the audit worker gives it the next ``seq``, the time, the
hash of the record before it (``prev_hash``) and its own ``hash`` — sha256 over the canonical JSON
of every field but ``hash`` (:func:`tackroom.kit.audit.record_hash`) — and stores it as an
:class:`AuditRecord`. Editing, removing or reordering a stored or exported record breaks the chain
where it happened, and ``audit::verify`` / ``tackroom audit verify`` name that record.

Facts arrive two ways:

- on the stream :data:`FACTS` (one group, so one order for all): the event emitter records the
  facts of security-relevant ``agent::events`` (run starts, gate, approval and budget decisions,
  tool calls with argument digests, run ends) as it emits them, and the workers that own other
  facts (credential use, policy reloads, session deletion) append theirs
  (:func:`tackroom.kit.audit.record_fact`) — an append never fails because no audit worker runs,
  and nothing is lost while it is down: the worker reads the stream from its stored cursor;
- any caller may ``audit::append`` (:data:`APPEND`) and get the record's ``seq`` back.

Every fact has a ``fact_id``; a fact seen before is not recorded again (a redelivered trigger, a
replayed step). Records never hold secrets or tool arguments: arguments are digested, keys are
named by fingerprint.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function, Stream
from tackroom.contracts.principal import Principal

__all__ = [
    "APPEND",
    "ARCHIVE",
    "EXPORT",
    "FACTS",
    "FACTS_GROUP",
    "GENESIS_HASH",
    "KINDS",
    "SCHEMA_VERSION",
    "STATUS",
    "VERIFY",
    "AppendRequest",
    "AppendResponse",
    "ArchiveRequest",
    "ArchiveResponse",
    "AuditFact",
    "AuditRecord",
    "AuditStatus",
    "ChainAnchor",
    "ChainProblem",
    "ExportPage",
    "ExportRequest",
    "StatusRequest",
    "VerifyReport",
    "VerifyRequest",
]

SCHEMA_VERSION = 1
GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first record of a log."""
FACTS_GROUP = "facts"

KINDS: dict[str, str] = {
    "run_started": "a run began (with the principal it acts for)",
    "gate_decision": "the gate allowed, denied or asked about a tool call, and by which rule",
    "approval_resolved": "a person (or the expiry) decided a parked call (and who, verified)",
    "approval_vote": "an approver's allow counted towards a quorum; the call still waits",
    "approval_refused": "a resolve was refused: an approver the rules do not allow, or of another"
    " tenant",
    "budget_decision": "the budget allowed or refused a model call",
    "tool_call": "a tool was called (its arguments as a sha256 digest)",
    "tool_result": "a tool call ended (its result as a sha256 digest)",
    "run_end": "a run stopped or failed",
    "credential_used": "a provider key was handed out (by fingerprint)",
    "credential_changed": "a provider key was stored or deleted (by fingerprint)",
    "policy_loaded": "a policy file came into force (path, digest, generation)",
    "session_deleted": "a session and what derives from it were deleted",
    "records_archived": "audit records were moved to an archive file",
    "runs_held": "a kill switch was turned on: a tenant's (or principal's) runs aborted, refused",
    "runs_released": "a kill switch was lifted: the tenant's (or principal's) runs may start",
}
"""The kinds the shipped writers record; other writers may add their own (``[a-z_]+``)."""

_KIND = r"^[a-z][a-z0-9_]{0,63}$"
_HASH = r"^[0-9a-f]{64}$"


class AuditFact(_Model):
    """What a writer records. ``fact`` holds the details — never a secret nor raw arguments."""

    schema_version: int = SCHEMA_VERSION
    fact_id: str = Field(
        min_length=1, max_length=300, description="unique per fact: a repeat is recorded once"
    )
    kind: str = Field(pattern=_KIND)
    principal: Principal | None = Field(default=None, description="who the run acts for")
    actor: str | None = Field(
        default=None, max_length=200, description="who did it when not the principal"
    )
    session_id: str | None = None
    run_id: str | None = None
    at: float | None = Field(default=None, description="when it happened (epoch s), if known")
    fact: dict[str, Any] = Field(default_factory=dict)


class AuditRecord(AuditFact):
    """One record of the log: a fact with its place in the chain."""

    seq: int = Field(ge=1)
    time: str = Field(description="when it was recorded, ISO 8601 UTC")
    prev_hash: str = Field(pattern=_HASH)
    hash: str = Field(pattern=_HASH)


class ChainAnchor(_Model):
    """Where a (possibly pruned) chain starts: its first record's ``seq`` and ``prev_hash``."""

    schema_version: int = Field(default=SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    first_seq: int = Field(default=1, ge=1)
    prev_hash: str = Field(default=GENESIS_HASH, pattern=_HASH)


class ChainProblem(_Model):
    seq: int | None = Field(description="the record where the chain breaks (None: unreadable)")
    line: int | None = Field(default=None, description="its line in an exported file")
    kind: str = Field(description="edited | removed | reordered | truncated | unreadable")
    message: str


FACTS = Stream[AuditFact]("audit::facts", AuditFact)
"""Facts from the workers that own them (group :data:`FACTS_GROUP`)."""


class _Versioned(_Model):
    """A function's request or reply: it carries the contract's ``schema_version``."""

    schema_version: int = SCHEMA_VERSION


class AppendRequest(_Versioned):
    fact: AuditFact


class AppendResponse(_Versioned):
    seq: int
    hash: str
    duplicate: bool = Field(description="the fact_id was recorded before: nothing was added")


class ExportRequest(_Versioned):
    after_seq: int = Field(default=0, ge=0, description="records after this seq (paging)")
    since: float | None = Field(
        default=None,
        description="every record from the first one recorded at or after this epoch s on; the"
        " page's anchor is then that record's seq and the hash of the record before it",
    )
    session_id: str | None = None
    tenant: str | None = Field(
        default=None,
        description="only this tenant's records: its principals' facts, and its sessions'",
    )
    limit: int = Field(default=1000, ge=1, le=10_000)


class ExportPage(_Versioned):
    anchor: ChainAnchor
    head_seq: int = Field(description="the last record of the log (0: none)")
    head_hash: str
    records: list[dict[str, Any]] = Field(
        description="records as stored (their canonical JSON objects), by seq"
    )
    next_after: int | None = Field(description="pass as after_seq for more; null: the last page")


class VerifyRequest(_Versioned):
    pass


class VerifyReport(_Versioned):
    ok: bool
    records: int = Field(description="records checked")
    anchor: ChainAnchor
    head_seq: int
    head_hash: str
    problem: ChainProblem | None = None


class StatusRequest(_Versioned):
    pass


class AuditStatus(_Versioned):
    path: str
    records: int
    anchor: ChainAnchor
    head_seq: int
    head_hash: str
    oldest: str | None = Field(description="time of the oldest record kept")
    retention_days: float | None


class ArchiveRequest(_Versioned):
    older_than_days: float | None = Field(
        default=None, ge=0, description="default: the worker's retention_days"
    )


class ArchiveResponse(_Versioned):
    archived: int
    file: str | None = Field(description="the JSONL file the records went to (None: none)")
    anchor: ChainAnchor


APPEND = Function[AppendRequest, AppendResponse](
    "audit::append", AppendRequest, AppendResponse, description="Record one audit fact."
)
EXPORT = Function[ExportRequest, ExportPage](
    "audit::export", ExportRequest, ExportPage, description="Audit records by seq, a page."
)
VERIFY = Function[VerifyRequest, VerifyReport](
    "audit::verify",
    VerifyRequest,
    VerifyReport,
    description="Walk the stored chain; name the first edited, removed or reordered record.",
)
STATUS = Function[StatusRequest, AuditStatus](
    "audit::status", StatusRequest, AuditStatus, description="What the audit log holds."
)
ARCHIVE = Function[ArchiveRequest, ArchiveResponse](
    "audit::archive",
    ArchiveRequest,
    ArchiveResponse,
    description="Move old records to a JSONL archive; the chain's anchor stays.",
)
