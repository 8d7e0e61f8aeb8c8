"""The ``access:`` section of ``permissions.yaml`` → :class:`~.access.AccessRules`, with lines.

```yaml
access:                       # optional; absent: the built-in table (defaults.yaml)
  - id: viewers               # required, unique among access rules; not "builtin:..."
    roles: [viewer]           # required: any of these roles; "*": any principal
    unless_roles: [frozen]    # optional: …holding none of these
    actions: [read, stream]   # required: read, stream, run, fork, pin, compact, delete,
                              #   approve, budget_admin — or "*"
    resources: [session]      # optional: session, approval, budget, trace, catalog, or "*"
                              #   (the default)
    decision: allow           # required: allow | deny
    reason: viewers only look # optional: one line, returned as the answer's reason
```

The loader (:mod:`tackroom.workers.policy.loader`) hands in its node walker, which knows the
file's name and turns a problem into ``PolicyFileError`` at the node's line.
"""

from __future__ import annotations

from typing import NoReturn, Protocol, TypeVar

import yaml

from tackroom.contracts.policy import RESOURCE_ACTIONS, RESOURCE_KINDS
from tackroom.kit.rulesfile import suggest
from tackroom.workers.policy.access import ANY_ROLE, AccessRule, AccessRules

__all__ = ["ACCESS_DECISIONS", "ACCESS_RULE_KEYS", "Nodes", "parse_access"]

ACCESS_RULE_KEYS = ("id", "roles", "unless_roles", "actions", "resources", "decision", "reason")
ACCESS_DECISIONS = ("allow", "deny")
_REQUIRED = ("id", "roles", "actions", "decision")

N = TypeVar("N", bound=str)


class Nodes(Protocol):
    """What the access section needs of the loader's walker."""

    def fail(self, node: yaml.Node, field: str | None, reason: str) -> NoReturn: ...

    def mapping(
        self, node: yaml.Node, field: str | None, what: str
    ) -> list[tuple[str, yaml.Node, yaml.Node]]: ...

    def string(self, node: yaml.Node, field: str) -> str: ...

    def entries(
        self,
        node: yaml.Node,
        field: str,
        what: str,
        *,
        known: tuple[str, ...],
        required: tuple[str, ...],
    ) -> dict[str, yaml.Node]: ...

    def rule_id(self, node: yaml.Node, field: str) -> str: ...


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def parse_access(nodes: Nodes, node: yaml.Node) -> AccessRules:
    """The ``access:`` list; the first bad rule fails the whole file."""
    if not isinstance(node, yaml.SequenceNode):
        shown = "a mapping" if isinstance(node, yaml.MappingNode) else "a single value"
        nodes.fail(node, "access", f"expected a list of access rules, got {shown}")
    rules: list[AccessRule] = []
    ids: dict[str, int] = {}
    for index, rule_node in enumerate(node.value):
        field = f"access[{index}]"
        rule = _rule(nodes, rule_node, field)
        if rule.id in ids:
            nodes.fail(
                rule_node,
                f"{field}.id",
                f"access rule id {rule.id!r} is already used at line {ids[rule.id]}",
            )
        ids[rule.id] = _line(rule_node)
        rules.append(rule)
    return AccessRules(tuple(rules))


def _rule(nodes: Nodes, node: yaml.Node, field: str) -> AccessRule:
    found = nodes.entries(
        node,
        field,
        "an access rule: a mapping with id, roles, actions and decision",
        known=ACCESS_RULE_KEYS,
        required=_REQUIRED,
    )
    rule_id = nodes.rule_id(found["id"], f"{field}.id")
    decision = nodes.string(found["decision"], f"{field}.decision")
    if decision == "needs_approval":
        nodes.fail(
            found["decision"],
            f"{field}.decision",
            "an access rule allows or denies (needs_approval is for tool calls, under rules:)",
        )
    if decision not in ACCESS_DECISIONS:
        nodes.fail(
            found["decision"],
            f"{field}.decision",
            f"unknown decision {decision!r}" + suggest(decision, ACCESS_DECISIONS),
        )
    roles = _roles(nodes, found["roles"], f"{field}.roles", wildcard=True)
    unless: frozenset[str] = frozenset()
    if "unless_roles" in found:
        where = f"{field}.unless_roles"
        unless = _roles(nodes, found["unless_roles"], where, wildcard=False)
        both = sorted(roles & unless)
        if both:
            nodes.fail(
                found["unless_roles"],
                where,
                f"role {both[0]!r} is in both roles and unless_roles: the rule would never apply",
            )
    reason = None
    if "reason" in found:
        reason = " ".join(nodes.string(found["reason"], f"{field}.reason").split())
    return AccessRule(
        id=rule_id,
        roles=roles,
        unless_roles=unless,
        actions=_choices(nodes, found["actions"], f"{field}.actions", RESOURCE_ACTIONS, "action"),
        resources=(
            _choices(nodes, found["resources"], f"{field}.resources", RESOURCE_KINDS, "resource")
            if "resources" in found
            else frozenset(RESOURCE_KINDS)
        ),
        decision="allow" if decision == "allow" else "deny",
        reason=reason,
        line=_line(node),
    )


def _names(nodes: Nodes, node: yaml.Node, field: str, what: str) -> list[tuple[str, yaml.Node]]:
    """A name, or a non-empty list of names (no spaces in one)."""
    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    if not items:
        nodes.fail(node, field, f"expected {what} or a non-empty list of them")
    names = []
    for item in items:
        name = nodes.string(item, field)
        if any(char.isspace() for char in name):
            nodes.fail(item, field, f"a name has no spaces: {name!r}")
        names.append((name, item))
    return names


def _roles(nodes: Nodes, node: yaml.Node, field: str, *, wildcard: bool) -> frozenset[str]:
    names = _names(nodes, node, field, "a role")
    for name, item in names:
        if name == ANY_ROLE and not wildcard:
            nodes.fail(item, field, "'*' here would exclude every principal")
        if name == ANY_ROLE and len(names) > 1:
            nodes.fail(item, field, "'*' already means any principal: list no role with it")
    return frozenset(name for name, _ in names)


def _choices(
    nodes: Nodes, node: yaml.Node, field: str, known: tuple[N, ...], what: str
) -> frozenset[N]:
    """Known names, or ``*`` for all of them."""
    chosen: set[N] = set()
    names = _names(nodes, node, field, f"an {what}" if what[0] in "aeiou" else f"a {what}")
    for name, item in names:
        if name == "*":
            if len(names) > 1:
                nodes.fail(item, field, f"'*' already means every {what}: name nothing else")
            return frozenset(known)
        match = next((choice for choice in known if choice == name), None)
        if match is None:
            nodes.fail(item, field, f"unknown {what} {name!r}" + suggest(name, known))
        chosen.add(match)
    return frozenset(chosen)
