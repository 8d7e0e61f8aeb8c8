"""What a model call is charged to: budget scopes, a call's chain, and the runs it answers to.

A budget's ``scope`` is the key it is found under:

- ``session/<id>``, ``agent/<id>``, ``workspace/<id>``;
- ``tenant/<tenant>``: every call of the tenant's runs;
- ``user/<tenant>~<user>``: every call of one user's runs (``~`` never occurs in a tenant name:
  it is the tenant separator of ids, :mod:`tackroom.contracts.tenancy`).

A budget may also be limited to one ``tenant`` and/or one ``user``: ``agent/coder`` with
``tenant: acme`` counts only acme's calls of the coder agent. A budget with neither applies to
every tenant (every budget made before tenants existed does).

A call names its **chain**: its session and agent, the workspace, its principal's tenant and user,
and its **leads** — the runs it is a subagent of, nearest first (their sessions and agents) — so a
subagent's spend also counts on every budget of the run that called it, and of that run's lead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Protocol

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tackroom.contracts.principal import DEFAULT_TENANT, TENANT_PATTERN

__all__ = [
    "SCOPE_PATTERN",
    "ChainFields",
    "ChainId",
    "Lead",
    "ScopeName",
    "TenantName",
    "UserName",
    "applies",
    "chain_of",
    "resolve_scope",
    "tenant_scope",
    "user_of_scope",
    "user_scope",
]

_ID = r"[!-.0-~]{1,200}"
_TENANT = TENANT_PATTERN.removeprefix("^").removesuffix("$")
_USER = r"[^\s\x00-\x1f\x7f]{1,200}"
SCOPE_PATTERN = rf"^(?:(?:workspace|agent|session)/{_ID}|tenant/{_TENANT}|user/{_TENANT}~{_USER})$"

ScopeName = Annotated[str, StringConstraints(pattern=SCOPE_PATTERN)]
ChainId = Annotated[str, StringConstraints(pattern=rf"^{_ID}$")]
TenantName = Annotated[str, StringConstraints(pattern=TENANT_PATTERN)]
UserName = Annotated[str, StringConstraints(pattern=rf"^{_USER}$")]


class Lead(BaseModel):
    """A run the charged run is a subagent of: its session, and the agent it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    session_id: ChainId
    agent: ChainId | None = None


def tenant_scope(tenant: str) -> str:
    return f"tenant/{tenant}"


def user_scope(tenant: str, user: str) -> str:
    return f"user/{tenant}~{user}"


def user_of_scope(scope: str) -> tuple[str, str | None] | None:
    """``(tenant, user or None)`` of a ``tenant/`` or ``user/`` scope; ``None`` for the others."""
    kind, _, rest = scope.partition("/")
    if kind == "tenant":
        return rest, None
    if kind == "user":
        tenant, _, user = rest.partition("~")
        return tenant, user
    return None


class Scoped(Protocol):
    """A charged call's place: what :func:`scopes_of` reads."""

    @property
    def session_id(self) -> str: ...
    @property
    def agent(self) -> str | None: ...
    @property
    def workspace(self) -> str | None: ...
    @property
    def tenant(self) -> str | None: ...
    @property
    def user(self) -> str | None: ...
    @property
    def leads(self) -> Sequence[Lead]: ...


def scopes_of(call: Scoped) -> list[str]:
    """:func:`chain_of` for a request or a stored reservation."""
    return chain_of(
        session_id=call.session_id,
        agent=call.agent,
        workspace=call.workspace,
        tenant=call.tenant,
        user=call.user,
        leads=call.leads,
    )


def chain_of(
    *,
    session_id: str,
    agent: str | None = None,
    workspace: str | None = None,
    tenant: str | None = None,
    user: str | None = None,
    leads: Sequence[Lead] = (),
) -> list[str]:
    """The scopes a call is charged to, narrowest first, each once: its session and its leads'
    sessions, its agent and its leads' agents, the workspace, the user, the tenant. A user
    without a tenant is of the default tenant."""
    scopes = [f"session/{session_id}", *(f"session/{lead.session_id}" for lead in leads)]
    agents = [agent, *(lead.agent for lead in leads)]
    scopes.extend(f"agent/{name}" for name in agents if name is not None)
    if workspace is not None:
        scopes.append(f"workspace/{workspace}")
    if user is not None:
        tenant = tenant or DEFAULT_TENANT
        scopes.append(user_scope(tenant, user))
    if tenant is not None:
        scopes.append(tenant_scope(tenant))
    return list(dict.fromkeys(scopes))


def applies(
    budget_tenant: str | None, budget_user: str | None, *, tenant: str | None, user: str | None
) -> bool:
    """Whether a call of ``tenant``'s ``user`` counts on a budget limited to ``budget_tenant``
    and ``budget_user`` (``None``: any). A call with a user and no tenant is of the default
    tenant; a call with neither counts on no limited budget."""
    if user is not None and tenant is None:
        tenant = DEFAULT_TENANT
    if budget_tenant is not None and budget_tenant != tenant:
        return False
    return budget_user is None or budget_user == user


def resolve_scope(
    scope: str | None, *, agent: str | None, tenant: str | None, user: str | None
) -> tuple[str, str | None, str | None]:
    """``(scope, tenant, user)`` of a new budget: ``scope``, else ``agent/<agent>``, else the
    user's scope, else the tenant's; a ``tenant/`` or ``user/`` scope sets its own tenant and
    user. Raises ``ValueError`` when nothing names a scope or the names disagree."""
    if scope is None:
        if agent is not None:
            scope = f"agent/{agent}"
        elif user is not None:
            scope = user_scope(tenant or DEFAULT_TENANT, user)
        elif tenant is not None:
            scope = tenant_scope(tenant)
        else:
            raise ValueError("name a scope, or an agent, a tenant or a user")
    elif agent is not None and scope != f"agent/{agent}":
        raise ValueError(f"scope {scope} and agent {agent} disagree")
    owner = user_of_scope(scope)
    if owner is None:
        return scope, (tenant or DEFAULT_TENANT) if user is not None else tenant, user
    own_tenant, own_user = owner
    if tenant not in (None, own_tenant) or (own_user is not None and user not in (None, own_user)):
        raise ValueError(f"scope {scope} disagrees with tenant {tenant!r} and user {user!r}")
    return scope, own_tenant, own_user or user


class ChainFields(BaseModel):
    """What a model call is charged to: the fields of ``budget::check`` and ``budget::record``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    session_id: ChainId
    agent: ChainId | None = Field(default=None, description="the agent the run is")
    workspace: ChainId | None = None
    tenant: TenantName | None = Field(default=None, description="the run's principal's tenant")
    user: UserName | None = Field(default=None, description="the run's principal's id")
    leads: list[Lead] = Field(
        default_factory=list,
        max_length=64,
        description="the runs this one is a subagent of, nearest first: charged too",
    )

    def chain(self) -> list[str]:
        return scopes_of(self)
