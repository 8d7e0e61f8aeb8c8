"""``permissions.yaml`` → :class:`~tackroom.workers.policy.rules.Ruleset`, or a line and a reason.

The ``access:`` section (who may do what to sessions, approvals, budgets…) is read by
:mod:`tackroom.workers.policy.accessfile`; a file without one gets the built-in section of
``defaults.yaml``. A rule's ``flow:`` block is read by :mod:`tackroom.workers.policy.flowfile`,
and the YAML itself by :mod:`tackroom.workers.policy.yaml12`.

The file is validated whole: the first problem rejects it with :class:`PolicyFileError`
(``path:line: field: reason``), and nothing of it is used. Scalars are read the YAML 1.2 way:
only ``true``/``false`` are booleans (``no``, ``on``, ``y`` stay strings), ``010`` is ten, and
``1:20`` or ``2024-01-01`` are strings — a rule compares them with JSON arguments, so YAML 1.1's
surprises would be silent policy bugs. Duplicate keys and merge keys (``<<``) are errors.
"""

from __future__ import annotations

import math
from functools import cache
from importlib import resources
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError

from tackroom.contracts.approvers import MAX_QUORUM, ApproverRules
from tackroom.kit.rulesfile import PolicyFileError, suggest
from tackroom.runtime.typed import describe_validation_error
from tackroom.runtime.yamlfile import problem_of, shown_key
from tackroom.workers.policy.access import AccessRules
from tackroom.workers.policy.accessfile import parse_access
from tackroom.workers.policy.flowfile import parse_flow
from tackroom.workers.policy.rules import (
    DECISIONS,
    OPERATORS,
    Constraint,
    Rule,
    Ruleset,
    equals,
    host_in,
    in_range,
    matches,
    one_of,
    under,
)
from tackroom.workers.policy.yaml12 import RulesLoader

__all__ = ["BUILTIN_NAME", "SCHEMA_VERSION", "builtin_access", "builtin_text", "parse_rules"]

SCHEMA_VERSION = 1
BUILTIN_NAME = "<builtin permissions.yaml>"

_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_TOP_KEYS = ("schema_version", "rules", "access")
_REQUIRED_TOP_KEYS = ("schema_version", "rules")
_RULE_KEYS = ("id", "function", "decision", "reason", "args", "flow", "approvers")
_APPROVER_KEYS = ("roles", "four_eyes", "quorum")
_REQUIRED_RULE_KEYS = ("id", "function", "decision")


def builtin_text() -> str:
    """The rules in force when there is no rules file (shipped as ``defaults.yaml``)."""
    return (resources.files(__package__) / "defaults.yaml").read_text(encoding="utf-8")


@cache
def builtin_access() -> AccessRules:
    """The access rules of a file without an ``access:`` section: ``defaults.yaml``'s."""
    shipped = parse_rules(builtin_text(), BUILTIN_NAME).access
    return AccessRules(shipped.rules, builtin=True)


# -- walking the node tree, with lines -----------------------------------------------------------


def parse_rules(text: str, path: str) -> Ruleset:
    """Parse and validate a whole rules file; raise PolicyFileError at the first problem."""
    loader: RulesLoader | None = None
    try:
        loader = RulesLoader(text)  # the reader refuses control characters here already
        root = loader.get_single_node()
        return _Walker(loader, path).ruleset(root)
    except yaml.YAMLError as exc:
        problem = problem_of(exc, text)
        raise PolicyFileError(path, problem.reason, line=problem.line) from None
    except RecursionError:
        raise PolicyFileError(path, "too deeply nested") from None
    finally:
        if loader is not None:
            loader.dispose()


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _json_problem(value: Any) -> str | None:
    """Why ``value`` is not a JSON value, or ``None``."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a JSON number"
    if isinstance(value, list):
        return next((p for p in map(_json_problem, value) if p), None)
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            return "object keys must be strings"
        return next((p for p in map(_json_problem, value.values()) if p), None)
    return f"a {type(value).__name__} is not a JSON value"


class _Walker:
    def __init__(self, loader: RulesLoader, path: str) -> None:
        self._loader = loader
        self._path = path

    def fail(self, node: yaml.Node, field: str | None, reason: str) -> NoReturn:
        raise PolicyFileError(self._path, reason, line=_line(node), field=field)

    def mapping(
        self, node: yaml.Node, field: str | None, what: str
    ) -> list[tuple[str, yaml.Node, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, field, f"expected {what}, got {_kind(node)}")
        seen: dict[str, int] = {}
        items: list[tuple[str, yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                self.fail(key_node, field, "YAML merge keys (<<) are not supported")
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR:
                self.fail(key_node, field, f"keys must be strings, got {_kind(key_node)}")
            key = str(key_node.value)
            if key in seen:
                self.fail(key_node, field, f"duplicate key {key!r} (first at line {seen[key]})")
            seen[key] = _line(key_node)
            items.append((key, key_node, value_node))
        return items

    def entries(
        self,
        node: yaml.Node,
        field: str,
        what: str,
        *,
        known: tuple[str, ...],
        required: tuple[str, ...],
    ) -> dict[str, yaml.Node]:
        """A rule's mapping by key: every key known, every required one there."""
        items = self.mapping(node, field, what)
        for key, key_node, _ in items:
            if key not in known:
                self.fail(key_node, f"{field}.{key}", "unknown key" + suggest(key, known))
        found = {key: value_node for key, _, value_node in items}
        for key in required:
            if key not in found:
                self.fail(node, field, f"missing {key!r}")
        return found

    def rule_id(self, node: yaml.Node, field: str) -> str:
        rule_id = self.string(node, field)
        if rule_id.startswith("builtin:"):
            self.fail(node, field, "ids starting with 'builtin:' are reserved")
        return rule_id

    def string(self, node: yaml.Node, field: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag != _STR:
            self.fail(node, field, f"expected a string, got {_kind(node)}")
        value = str(node.value)
        if not value.strip():
            self.fail(node, field, "must not be empty")
        return value

    def value(self, node: yaml.Node, field: str) -> Any:
        value = self._loader.construct_object(node, deep=True)
        problem = _json_problem(value)
        if problem is not None:
            self.fail(node, field, problem)
        return value

    # -- the document ----------------------------------------------------------------------------
    def ruleset(self, root: yaml.Node | None) -> Ruleset:
        if root is None:
            raise PolicyFileError(
                self._path, "the file is empty (expected schema_version: 1 and rules)", line=1
            )
        items = self.mapping(root, None, "a mapping with schema_version and rules")
        found = {key: (key_node, value_node) for key, key_node, value_node in items}
        for key, key_node, _ in items:
            if key not in _TOP_KEYS:
                self.fail(key_node, key, "unknown key" + suggest(key, _TOP_KEYS))
        for key in _REQUIRED_TOP_KEYS:
            if key not in found:
                self.fail(root, None, f"missing {key!r}")
        version_node = found["schema_version"][1]
        version = self.value(version_node, "schema_version")
        if isinstance(version, bool) or version != SCHEMA_VERSION:
            self.fail(
                version_node,
                "schema_version",
                f"unsupported schema_version {version!r} (this tackroom reads {SCHEMA_VERSION})",
            )
        rules_node = found["rules"][1]
        if not isinstance(rules_node, yaml.SequenceNode):
            self.fail(rules_node, "rules", f"expected a list of rules, got {_kind(rules_node)}")
        rules: list[Rule] = []
        ids: dict[str, int] = {}
        for index, rule_node in enumerate(rules_node.value):
            rule = self.rule(rule_node, f"rules[{index}]")
            if rule.id in ids:
                self.fail(
                    rule_node,
                    f"rules[{index}].id",
                    f"rule id {rule.id!r} is already used at line {ids[rule.id]}",
                )
            ids[rule.id] = _line(rule_node)
            rules.append(rule)
        if "access" not in found:
            return Ruleset(tuple(rules), builtin_access())
        return Ruleset(tuple(rules), parse_access(self, found["access"][1]))

    def rule(self, node: yaml.Node, field: str) -> Rule:
        found = self.entries(
            node,
            field,
            "a rule: a mapping with id, function and decision",
            known=_RULE_KEYS,
            required=_REQUIRED_RULE_KEYS,
        )
        rule_id = self.rule_id(found["id"], f"{field}.id")
        decision = self.string(found["decision"], f"{field}.decision")
        if decision not in DECISIONS:
            self.fail(
                found["decision"],
                f"{field}.decision",
                f"unknown decision {decision!r}" + suggest(decision, DECISIONS),
            )
        reason = self.string(found["reason"], f"{field}.reason") if "reason" in found else None
        constraints = self.args(found["args"], f"{field}.args") if "args" in found else ()
        flow = parse_flow(self, found["flow"], f"{field}.flow") if "flow" in found else None
        approvers = None
        if "approvers" in found:
            if decision != "needs_approval":
                self.fail(
                    found["approvers"],
                    f"{field}.approvers",
                    f"only a needs_approval rule names approvers (this one is {decision})",
                )
            approvers = self.approvers(found["approvers"], f"{field}.approvers")
        return Rule(
            id=rule_id,
            functions=self.functions(found["function"], f"{field}.function"),
            decision=decision,
            reason=reason,
            constraints=constraints,
            line=_line(node),
            approvers=approvers,
            flow=flow,
        )

    def approvers(self, node: yaml.Node, field: str) -> ApproverRules:
        """``{roles: [admin], four_eyes: true, quorum: 2}``: at least one of them."""
        items = self.mapping(node, field, "a mapping with roles, four_eyes and/or quorum")
        if not items:
            self.fail(node, field, "name roles, four_eyes or quorum")
        values: dict[str, Any] = {}
        for key, key_node, value_node in items:
            where = f"{field}.{key}"
            if key not in _APPROVER_KEYS:
                self.fail(key_node, where, "unknown key" + suggest(key, _APPROVER_KEYS))
            if key == "roles":
                nodes = value_node.value if isinstance(value_node, yaml.SequenceNode) else None
                if not nodes:
                    self.fail(value_node, where, "expected a non-empty list of role names")
                roles = [self.string(item, where) for item in nodes]
                if any(any(char.isspace() for char in role) for role in roles):
                    self.fail(value_node, where, "a role name has no spaces")
                values[key] = tuple(dict.fromkeys(roles))
                continue
            value = self.value(value_node, where)
            if key == "four_eyes" and not isinstance(value, bool):
                self.fail(value_node, where, f"expected true or false, got {value!r}")
            whole = isinstance(value, int) and not isinstance(value, bool)
            if key == "quorum" and not (whole and 1 <= value <= MAX_QUORUM):
                self.fail(value_node, where, f"expected a whole number from 1 to {MAX_QUORUM}")
            values[key] = value
        try:
            return ApproverRules(**values)
        except ValidationError as exc:
            self.fail(node, field, describe_validation_error(exc))

    def functions(self, node: yaml.Node, field: str) -> tuple[str, ...]:
        nodes = node.value if isinstance(node, yaml.SequenceNode) else [node]
        if not nodes:
            self.fail(node, field, "expected a function-id glob or a non-empty list of them")
        patterns = []
        for item in nodes:
            pattern = self.string(item, field)
            if any(char.isspace() for char in pattern):
                self.fail(item, field, f"a function-id glob has no spaces: {pattern!r}")
            patterns.append(pattern)
        return tuple(patterns)

    def args(self, node: yaml.Node, field: str) -> tuple[Constraint, ...]:
        constraints: list[Constraint] = []
        for arg, _, ops_node in self.mapping(node, field, "a mapping of argument → constraints"):
            where = f"{field}.{shown_key(arg)}"
            ops = self.mapping(ops_node, where, f"constraints such as {{equals: ...}} on {arg!r}")
            if not ops:
                self.fail(ops_node, where, "no constraint given")
            for op, op_node, operand in ops:
                constraints.append(self.constraint(arg, op, op_node, operand, f"{where}.{op}"))
        return tuple(constraints)

    def constraint(
        self, arg: str, op: str, op_node: yaml.Node, operand: yaml.Node, field: str
    ) -> Constraint:
        if op not in OPERATORS:
            self.fail(op_node, field, f"unknown constraint {op!r}" + suggest(op, OPERATORS))
        try:
            if op == "equals":
                return equals(arg, self.value(operand, field))
            if op == "one_of":
                if not isinstance(operand, yaml.SequenceNode):
                    self.fail(operand, field, f"expected a list of values, got {_kind(operand)}")
                return one_of(arg, self.value(operand, field))
            if op == "matches":
                return matches(arg, self.string(operand, field))
            if op == "under":
                return under(arg, self.string(operand, field))
            if op == "host_in":
                return host_in(arg, self.value(operand, field))
            bounds: dict[str, Any] = {}
            for key, key_node, bound_node in self.mapping(operand, field, "{min: ..., max: ...}"):
                if key not in ("min", "max"):
                    self.fail(key_node, f"{field}.{key}", "unknown key (known: min, max)")
                bounds[key] = self.value(bound_node, f"{field}.{key}")
            return in_range(arg, bounds.get("min"), bounds.get("max"))
        except ValueError as exc:
            self.fail(operand, field, str(exc))


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    names = {
        "tag:yaml.org,2002:null": "null",
        "tag:yaml.org,2002:bool": "a boolean",
        "tag:yaml.org,2002:int": "a number",
        "tag:yaml.org,2002:float": "a number",
        "tag:yaml.org,2002:str": "a string",
    }
    return names.get(node.tag, f"a {node.tag} value")
