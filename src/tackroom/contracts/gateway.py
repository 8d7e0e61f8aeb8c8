"""The HTTP API of the ``gateway`` worker (``/v1``): the bodies it reads and the shapes it answers.

Most responses are the models of the bus functions a route calls (``SessionInfo``,
``TurnStateView``, ``DecisionRecord``, ...), dumped with ``mode="json"``; this module holds only
what the HTTP surface adds: request bodies, pages, and the one error shape every 4xx/5xx has::

    {"error": {"code": "session_not_found", "message": "no session 'x'", "details": {...}}}

``docs/gateway.md`` lists every route with its body, response and errors.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from tackroom.contracts._base import Lenient as _Reply
from tackroom.contracts._base import Strict
from tackroom.contracts.agentconfig import AgentConfig
from tackroom.contracts.budget import Budget, UsageResponse
from tackroom.contracts.principal import AuthMethod, Principal
from tackroom.contracts.sessions import ID_PATTERN, PathMessage, SessionInfo
from tackroom.contracts.turn import TASK_PATTERN, Mode

__all__ = [
    "RUN_ID_PATTERN",
    "AbortBody",
    "AuthConfig",
    "BudgetView",
    "BudgetsPage",
    "CompactBody",
    "DecisionBody",
    "ErrorBody",
    "ErrorResponse",
    "ForkBody",
    "Health",
    "MessageBody",
    "OidcSignIn",
    "PinBody",
    "Readiness",
    "RunBody",
    "RunResponse",
    "SessionDetail",
    "SessionPage",
    "SignInMethod",
    "WhoAmI",
]

RUN_ID_PATTERN = r"^[A-Za-z0-9_.:@-]{1,120}$"
"""Session ids a run may name, and run ids (``run::start`` accepts these characters only)."""

_RunSessionId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:@-]{1,200}$")]
_SessionId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
_Glob = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class _Body(Strict):
    """A request body: unknown fields are an error (a typo is not silently ignored)."""


# -- errors ----------------------------------------------------------------------------------


class ErrorBody(_Reply):
    code: str = Field(description="snake_case, stable: what a client branches on")
    message: str = Field(description="one readable line: what is wrong and what to do")
    details: dict[str, Any] | None = None


class ErrorResponse(_Reply):
    error: ErrorBody


# -- runs ------------------------------------------------------------------------------------


class RunBody(_Body):
    """``POST /v1/runs``: what is not given comes from the gateway's defaults (``agent.*``)."""

    prompt: str = Field(min_length=1, max_length=1_000_000)
    session_id: _RunSessionId | None = Field(default=None, description="default: a fresh id")
    run_id: Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)] | None = Field(
        default=None, description="default: a fresh id; a retried start with it is idempotent"
    )
    model: str | None = Field(
        default=None,
        max_length=200,
        pattern=r"^[A-Za-z0-9_-]+:\S.*$",
        description="PROVIDER:MODEL, or a chain tried in order on transient failures"
        " (PROVIDER:MODEL -> PROVIDER:MODEL); default: agent.model",
    )
    task: str | None = Field(
        default=None,
        pattern=TASK_PATTERN,
        description="the kind of task: a route of that name chooses the model chain",
    )
    tools: list[_Glob] | None = Field(
        default=None, max_length=256, description="function ids or globs; default: agent.tools"
    )
    mode: Mode | None = None
    instructions: str | None = Field(default=None, max_length=200_000)
    max_turns: int | None = Field(default=None, ge=1, le=1000)
    output_schema: dict[str, Any] | None = Field(
        default=None,
        description="a JSON schema the final answer must validate against (the model is told;"
        " the client validates)",
    )
    principal: Principal | None = None
    if_busy: Literal["refuse", "queue"] = Field(
        default="refuse", description="a run in flight: refuse (409), or queue as a follow-up"
    )
    agent_config: AgentConfig | None = Field(
        default=None,
        description="the agent's configuration (model_backend, system_prompt, max_iterations,"
        " context_window_limit, tool_names, ...): what the fields above leave out; the gateway's"
        " defaults fill the rest",
    )


class RunResponse(_Reply):
    session_id: str
    run_id: str | None
    started: bool
    queued: bool = False
    resumed: bool = False
    reason: str | None = None
    events_url: str = Field(description="/v1/sessions/{session_id}/events")


class AbortBody(_Body):
    reason: str = Field(default="aborted by the user", min_length=1, max_length=2000)


# -- sessions --------------------------------------------------------------------------------


class SessionPage(_Reply):
    sessions: list[SessionInfo]
    next_cursor: str | None = Field(description="pass back as ?cursor=; null on the last page")


class SessionDetail(_Reply):
    session: SessionInfo
    entries: list[PathMessage] = Field(description="the active path, root first, one page")
    next_cursor: str | None = Field(description="pass back as ?cursor=; null on the last page")


class ForkBody(_Body):
    entry_id: _SessionId = Field(description="the entry the fork shares history up to")
    new_session_id: _SessionId | None = Field(default=None, description="default: a fresh id")
    display_name: str | None = Field(default=None, max_length=200)


class PinBody(_Body):
    """``POST /v1/sessions/{id}/pins``: pin ``entry_id``, or add ``text`` as a rule and pin it
    (with ``entry_id`` too, that is the rule's id: a retried request stores it once)."""

    entry_id: _SessionId | None = None
    text: str | None = Field(default=None, min_length=1, max_length=20_000)


class CompactBody(_Body):
    """``POST /v1/sessions/{id}/compact``: the model that writes the summary, default the
    session's own (its newest answer's), else the gateway's default model."""

    model: str | None = Field(
        default=None,
        max_length=200,
        pattern=r"^[A-Za-z0-9_-]+:\S.*$",
        description="PROVIDER:MODEL; default: the session's, else agent.model",
    )
    keep_last: int | None = Field(
        default=None, ge=1, le=1000, description="the newest entries kept whole; default: agent's"
    )


class MessageBody(_Body):
    """A message into a session's inbox: ``steer`` reaches the run in flight at its next step,
    ``follow_up`` starts the session's next run once this one ends."""

    text: str = Field(min_length=1, max_length=1_000_000)
    kind: Literal["steer", "follow_up"]


# -- approvals -------------------------------------------------------------------------------


class DecisionBody(_Body):
    decision: Literal["allow", "deny"]
    reason: str | None = Field(default=None, max_length=2000)
    always: bool = Field(
        default=False, description="allow: also allow this function for the rest of the session"
    )
    approver: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="default: the caller; naming another needs the impersonate role",
    )


# -- budgets, health -------------------------------------------------------------------------


class BudgetView(_Reply):
    budget: Budget
    usage: UsageResponse | None = Field(description="null when the usage could not be read")


class BudgetsPage(_Reply):
    budgets: list[BudgetView]


class Health(_Reply):
    status: Literal["ok"] = "ok"


class Readiness(_Reply):
    """``503`` when not ready, with ``error`` too (every 5xx body has one)."""

    ready: bool
    reason: str | None = None
    error: ErrorBody | None = None


# -- sign-in ---------------------------------------------------------------------------------

SignInMethod = Literal["api_key", "oidc", "token", "hook"]
"""A credential a gateway accepts: per-user API keys, OIDC access tokens, the one shared token,
a user's own authenticator (``auth.authenticator``)."""


class OidcSignIn(_Reply):
    """What a browser needs to sign in with the identity provider (authorization code + PKCE):
    public values only."""

    issuer: str = Field(description="discovery: {issuer}/.well-known/openid-configuration")
    client_id: str | None = Field(
        description="the public PKCE client of the console; null: no browser sign-in"
    )
    scopes: list[str]
    audience: str = Field(description="sent as the `resource` parameter (RFC 8707)")


class AuthConfig(_Reply):
    """``GET /v1/auth/config`` (no credential needed): how a client may sign in here."""

    methods: list[SignInMethod] = Field(description="the credentials accepted, in the order asked")
    oidc: OidcSignIn | None = Field(default=None, description="null: OIDC is not configured")


class WhoAmI(_Reply):
    """``GET /v1/me``: the principal the caller's credential established."""

    tenant: str
    user: str
    roles: list[str]
    method: AuthMethod
    on_behalf_of: str | None = None
    actions: list[str] = Field(description="what the caller's roles grant on this gateway")
