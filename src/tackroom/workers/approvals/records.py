"""The approvals worker's pure helpers: globs, times, the answers it gives, its typed errors."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tackroom.contracts import approvals as c
from tackroom.engine.errors import FunctionError

__all__ = [
    "allowed_by",
    "already_decided",
    "glob_matches",
    "not_pending",
    "parse",
    "same_call",
    "waiting",
    "when",
]

_log = logging.getLogger("tackroom.approvals")

M = TypeVar("M", bound=BaseModel)


def glob_matches(pattern: str, function_id: str) -> bool:
    """``*`` (any run of characters, ``::`` included) is the only wildcard; the match is whole."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, function_id) is not None


def when(epoch: float | None) -> str:
    if epoch is None:
        return "an unknown time"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def allowed_by(settings: c.SessionSettings, function_id: str) -> str | None:
    """Why the session's settings let ``function_id`` run without a person, or ``None``."""
    if settings.mode == "full":
        return "session mode full"
    if function_id in settings.allowed_functions:
        return f"{function_id} is allowed for the rest of the session"
    if settings.mode == "auto":
        for pattern in settings.always_allow:
            if glob_matches(pattern, function_id):
                return f"session mode auto: always_allow {pattern}"
    return None


def waiting(record: c.PendingApproval) -> c.ApprovalRequestResponse:
    return c.ApprovalRequestResponse(
        status="pending",
        reason=f"waiting for approval until {when(record.expires_at)}",
        expires_at=record.expires_at,
    )


def same_call(request: c.ApprovalRequest, known: c.PendingApproval | c.DecisionRecord) -> None:
    """A call id names one call: another function, other arguments or another run is refused.

    Reusing an earlier approval for a different call would run something nobody approved.
    """
    differs = []
    if known.function_id is not None and known.function_id != request.function_id:
        differs.append(f"function {known.function_id}")
    if known.arguments is not None and known.arguments != request.arguments:
        differs.append("other arguments")
    if known.run_id is not None and request.run_id is not None and known.run_id != request.run_id:
        differs.append(f"run {known.run_id}")
    if differs:
        raise FunctionError(
            c.CALL_CONFLICT_ERROR,
            f"call id {request.function_call_id} of session {request.session_id} is already used"
            f" by another call ({', '.join(differs)})",
        )


def not_pending(request: c.ResolveRequest) -> FunctionError:
    """The error of an unknown call — and of another tenant's, which must look the same."""
    return FunctionError(
        c.NOT_PENDING_ERROR,
        f"call {request.function_call_id} of session {request.session_id} is not waiting for"
        " approval",
    )


def already_decided(key: str, record: c.DecisionRecord | None) -> FunctionError:
    if record is None:  # pragma: no cover - decisions are never deleted
        return FunctionError(c.ALREADY_DECIDED_ERROR, f"call {key} was already decided")
    reason = f" ({record.reason})" if record.reason else ""
    return FunctionError(
        c.ALREADY_DECIDED_ERROR,
        f"call {key} was already decided: {record.decision}{reason} by"
        f" {record.approver or 'unknown'} at {when(record.decided_at)}",
    )


def parse(model: type[M], value: Any, key: str) -> M | None:
    try:
        return model.model_validate(value)
    except ValidationError:
        _log.warning("unreadable %s record at %s; skipped", model.__name__, key)
        return None
