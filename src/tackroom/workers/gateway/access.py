"""What the caller may do, and which sessions are theirs: every route asks here first.

A route names its action (``read``, ``run``, ``approve``…); the caller's roles grant actions
(``auth.roles``), and an action not granted is a 403. A session id in a path or body is the
caller's tenant's (:func:`tackroom.contracts.tenancy.qualify`): another tenant's session is
never reached, and answers exactly as a missing one does.
"""

from __future__ import annotations

from starlette.requests import Request

from tackroom.contracts.principal import Principal
from tackroom.contracts.tenancy import owns, qualify
from tackroom.engine.errors import FunctionError
from tackroom.kit.workspace import check_session_name
from tackroom.workers.gateway.errors import ApiError
from tackroom.workers.gateway.identity import principal_of
from tackroom.workers.gateway.inputs import path_id
from tackroom.workers.gateway.service import gateway_of
from tackroom.workers.gateway.settings import Action

__all__ = ["allowed", "caller", "named_session", "new_session", "owned", "session_in_path"]


def caller(request: Request, action: Action) -> Principal:
    """The principal, once its roles are found to grant ``action``."""
    principal = principal_of(request)
    if not allowed(request, principal, action):
        raise ApiError(
            403,
            "forbidden",
            f"{principal.id!r} may not {action.replace('_', ' ')} here: ask for a role that"
            " grants it",
            details={"action": action},
        )
    return principal


def allowed(request: Request, principal: Principal, action: Action) -> bool:
    return action in gateway_of(request).config.auth.actions_of(principal)


def named_session(principal: Principal, session_id: str) -> str:
    """The stored id of a session the caller names."""
    return qualify(principal.tenant, session_id)


def new_session(principal: Principal, session_id: str) -> str:
    """The stored id of a session the caller names to create (a run's, a fork's): refused when
    it could not name the session's workspace (``.``, ``..``, too long)."""
    stored = qualify(principal.tenant, session_id)
    try:
        check_session_name(stored, code="invalid_request")
    except FunctionError:
        raise ApiError(
            422,
            "invalid_request",
            f"session id {session_id!r} cannot name a session: not '.' or '..', and at most 200"
            f" bytes with its tenant ({principal.tenant!r})",
            details={"field": "session_id"},
        ) from None
    return stored


def session_in_path(request: Request, principal: Principal, name: str = "sid") -> str:
    return qualify(principal.tenant, path_id(request, name))


def owned(principal: Principal, session_id: str) -> bool:
    return owns(principal.tenant, session_id)
