"""Tenants as a boundary in ids: how the gateway keys a tenant's sessions.

A session a tenant creates is stored as ``<tenant>:<id>``; the default tenant's sessions keep their
plain ids (local use, and sessions from before tenants) unless the id holds a ``:``. Every store
keyed by session id (the tree, runs, turn records, events, approvals, workspaces) is thereby keyed
by tenant too, and an id from another tenant names a session that does not exist for the caller:
a 404 like any missing one. A subagent's session is in its lead's tenant.
"""

from __future__ import annotations

from tackroom.contracts.principal import DEFAULT_TENANT

__all__ = ["SEPARATOR", "owns", "qualify", "tenant_of", "unqualify"]

SEPARATOR = ":"


def qualify(tenant: str, session_id: str) -> str:
    """The stored id of ``session_id`` as ``tenant`` names it.

    An id already qualified with the caller's own tenant is taken as it is, so the ids a tenant
    is shown work when given back; any other id is put under the tenant, whether or not it names
    another tenant's session — so the answer never depends on what another tenant has. The
    default tenant keeps plain ids plain."""
    if session_id.startswith(tenant + SEPARATOR):
        return session_id
    if tenant == DEFAULT_TENANT and SEPARATOR not in session_id:
        return session_id
    return f"{tenant}{SEPARATOR}{session_id}"


def tenant_of(session_id: str) -> str:
    head, sep, _ = session_id.partition(SEPARATOR)
    return head if sep else DEFAULT_TENANT


def owns(tenant: str, session_id: str) -> bool:
    return tenant_of(session_id) == tenant


def unqualify(session_id: str) -> str:
    """The id without its tenant (for display)."""
    _, sep, rest = session_id.partition(SEPARATOR)
    return rest if sep else session_id
