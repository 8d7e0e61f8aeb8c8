"""Access rules, pure: who may do which action to which kind of resource (``policy::authorize``).

Nothing here reads a file or the clock. The loader builds :class:`AccessRules` from the
``access:`` section of ``permissions.yaml`` (:mod:`tackroom.workers.policy.accessfile`);
:meth:`AccessRules.decide` answers one request:

1. a principal acting on another tenant's resource is denied (``builtin:tenant``), whatever the
   rules say;
2. of the rules that apply — the principal holds one of ``roles`` (``*``: any principal) and
   none of ``unless_roles``, the action is one of ``actions``, the resource's kind one of
   ``resources`` — a ``deny`` wins over every ``allow``; the first such deny in the file names
   the decision, else the first allow;
3. no rule applies: denied (``builtin:default``) — fail closed.

Order does not change a decision (only which rule is named). ``unless_roles`` is what says
"every principal holding none of these roles", the fallback a role table needs: with deny-wins a
``*`` allow plus a viewer deny would also take from a viewer who is a member too.

Decisions are computed once per set of roles (every action on every kind: a small table) and
kept, so a decision is a dictionary look-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from tackroom.contracts.policy import (
    DEFAULT_RULE_ID,
    RESOURCE_ACTIONS,
    RESOURCE_KINDS,
    AccessDecision,
    AuthorizeRequest,
    AuthorizeResponse,
    ResourceAction,
    ResourceKind,
    access_denied_reason,
    tenant_verdict,
)

__all__ = ["ANY_ROLE", "AccessRule", "AccessRules"]

ANY_ROLE = "*"
"""In ``roles``: any principal, whatever roles it holds (none included)."""

_MAX_TABLES = 4096
"""Role sets whose decisions are kept; past it the cache starts over (role sets are few)."""

_Key = tuple[ResourceAction, ResourceKind]


@dataclass(frozen=True, slots=True)
class AccessRule:
    id: str
    roles: frozenset[str]
    """The principal holds one of them; :data:`ANY_ROLE` (alone): any principal."""
    actions: frozenset[ResourceAction]
    decision: AccessDecision
    resources: frozenset[ResourceKind] = frozenset(RESOURCE_KINDS)
    unless_roles: frozenset[str] = frozenset()
    """…and none of these."""
    reason: str | None = None
    line: int | None = None

    def holds_for(self, roles: frozenset[str]) -> bool:
        """Does the rule apply to a principal holding ``roles``?"""
        chosen = ANY_ROLE in self.roles or not self.roles.isdisjoint(roles)
        return chosen and self.unless_roles.isdisjoint(roles)

    def covers(self, action: ResourceAction, kind: ResourceKind) -> bool:
        return action in self.actions and kind in self.resources


class AccessRules:
    """An ``access:`` section, compiled; ``builtin``: the shipped defaults (the file had none)."""

    __slots__ = ("_tables", "builtin", "rules")

    def __init__(self, rules: tuple[AccessRule, ...] = (), *, builtin: bool = False) -> None:
        self.rules = rules
        self.builtin = builtin
        self._tables: dict[frozenset[str], dict[_Key, AuthorizeResponse]] = {}

    def decide(self, request: AuthorizeRequest) -> AuthorizeResponse:
        crossing = tenant_verdict(request)
        if crossing is not None:
            return crossing
        roles = frozenset(request.principal.roles)
        table = self._tables.get(roles)
        if table is None:
            if len(self._tables) >= _MAX_TABLES:
                self._tables.clear()
            table = self._tables[roles] = self._table(roles)
        return table[(request.action, request.resource.kind)]

    def _table(self, roles: frozenset[str]) -> dict[_Key, AuthorizeResponse]:
        """Every (action, kind)'s decision for a principal holding ``roles``."""
        applying = [rule for rule in self.rules if rule.holds_for(roles)]
        table: dict[_Key, AuthorizeResponse] = {}
        for action in RESOURCE_ACTIONS:
            denied = AuthorizeResponse(
                decision="deny",
                rule_id=DEFAULT_RULE_ID,
                reason=access_denied_reason(sorted(roles), action),
            )
            for kind in RESOURCE_KINDS:
                covering = [rule for rule in applying if rule.covers(action, kind)]
                deciding = next((r for r in covering if r.decision == "deny"), None)
                if deciding is None:
                    deciding = next(iter(covering), None)
                table[(action, kind)] = (
                    denied if deciding is None else _verdict(deciding, action, kind)
                )
        return table


def _verdict(rule: AccessRule, action: ResourceAction, kind: ResourceKind) -> AuthorizeResponse:
    what = f"{action.replace('_', ' ')} on {'an' if kind[0] in 'aeiou' else 'a'} {kind}"
    reason = rule.reason or (
        f"rule {rule.id!r} allows {what}"
        if rule.decision == "allow"
        else f"rule {rule.id!r} denies {what}"
    )
    return AuthorizeResponse(decision=rule.decision, rule_id=rule.id, reason=reason)
