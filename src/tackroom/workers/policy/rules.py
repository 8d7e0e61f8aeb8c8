"""Permission rules, pure: constraints, rules, and the first-match evaluation.

Nothing here reads a file or the clock. :mod:`tackroom.workers.policy.loader` builds a
:class:`Ruleset` from YAML; :func:`evaluate` decides one call:

1. a protected function (:data:`~tackroom.contracts.policy.PROTECTED_FUNCTIONS`) is
   denied, whatever the rules say;
2. the first rule whose function glob matches and whose every constraint holds decides — its
   ``flow:`` conditions too, when it has some (:mod:`tackroom.workers.policy.flow`; a request
   without flow facts matches no such rule);
3. otherwise the default decision.

(The worker's built-in flow rules, :mod:`tackroom.contracts.flow`, come between 1 and 2; the
serving kit applies them.)

A ``needs_approval`` rule may name its approvers (roles, four eyes, a quorum): they go back with
the answer (``CheckResponse.approvers``) for the approvals worker to enforce.

A constraint tests one top-level argument. A missing argument, or one of a type the constraint
cannot test, does not match, so the rule is skipped: constrain ``allow`` rules narrowly and keep
``deny`` rules broad (a constrained deny the caller can dodge is no deny).
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from tackroom.contracts.approvers import ApproverRules
from tackroom.contracts.policy import (
    DEFAULT_RULE_ID,
    CheckResponse,
    Decision,
    MatchedConstraint,
    function_glob,
    protected_verdict,
)
from tackroom.contracts.provenance import FlowFacts
from tackroom.workers.policy.access import AccessRules
from tackroom.workers.policy.flow import FlowBlock, FlowMatch

__all__ = [
    "DECISIONS",
    "OPERATORS",
    "Constraint",
    "Operator",
    "Rule",
    "Ruleset",
    "equals",
    "evaluate",
    "host_in",
    "in_range",
    "is_under",
    "json_equal",
    "matches",
    "normalize_path",
    "one_of",
    "under",
]

Operator = Literal["equals", "one_of", "matches", "under", "range", "host_in"]
OPERATORS: tuple[Operator, ...] = ("equals", "one_of", "matches", "under", "range", "host_in")
DECISIONS: tuple[Decision, ...] = ("allow", "deny", "needs_approval")


@dataclass(frozen=True, slots=True)
class Constraint:
    """``arg <op> value``; ``test`` decides on the argument's value (present only)."""

    arg: str
    op: Operator
    value: Any
    test: Callable[[Any], bool] = field(repr=False, compare=False)

    def holds(self, args: Mapping[str, Any]) -> bool:
        return self.arg in args and self.test(args[self.arg])

    def describe(self) -> MatchedConstraint:
        return MatchedConstraint(arg=self.arg, op=self.op, value=self.value)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    functions: tuple[str, ...]
    decision: Decision
    reason: str | None = None
    constraints: tuple[Constraint, ...] = ()
    line: int | None = None
    approvers: ApproverRules | None = None
    """``needs_approval`` rules only: who may approve."""
    flow: FlowBlock | None = None
    """Conditions on the call's flow facts; a call without facts never matches them."""

    def covers(self, function_id: str) -> bool:
        return any(function_glob(pattern).fullmatch(function_id) for pattern in self.functions)

    def applies(self, function_id: str, args: Mapping[str, Any]) -> bool:
        return self.covers(function_id) and all(c.holds(args) for c in self.constraints)


@dataclass(frozen=True, slots=True)
class Ruleset:
    rules: tuple[Rule, ...] = ()
    access: AccessRules = field(default_factory=AccessRules, compare=False)
    """The ``access:`` section (``policy::authorize``); none: every action denied."""


def evaluate(
    ruleset: Ruleset,
    function_id: str,
    args: Mapping[str, Any],
    *,
    default: Decision,
    flow: FlowFacts | None = None,
) -> CheckResponse:
    """Decide ``function_id(args)``: protected first, then the first matching rule, else default."""
    protected = protected_verdict(function_id)
    if protected is not None:
        return protected
    for rule in ruleset.rules:
        if not rule.applies(function_id, args):
            continue
        if rule.flow is None:
            return _verdict(rule, None)
        matched = rule.flow.match(flow)
        if matched is not None:
            return _verdict(rule, matched)
    return CheckResponse(
        decision=default,
        rule_id=DEFAULT_RULE_ID,
        reason=f"no rule matched {function_id}; the default decision is {default}",
    )


def _verdict(rule: Rule, flow: FlowMatch | None) -> CheckResponse:
    """The rule's answer; a rule with a ``flow:`` block names its flow condition, and its
    reason ends with the flow in words."""
    deciding = rule.constraints[0] if rule.constraints else None
    constraint: MatchedConstraint | None
    if flow is not None:
        constraint = flow.describe()
        reason = f"{rule.reason or f'rule {rule.id!r}: {rule.decision}'} (flow: {flow.why})"
    else:
        constraint = deciding.describe() if deciding is not None else None
        reason = rule.reason or _default_reason(rule, deciding)
    return CheckResponse(
        decision=rule.decision,
        rule_id=rule.id,
        matched_constraint=constraint,
        reason=reason,
        approvers=rule.approvers,
    )


def _default_reason(rule: Rule, deciding: Constraint | None) -> str:
    if deciding is None:
        return f"rule {rule.id!r}: {rule.decision}"
    return f"rule {rule.id!r}: {rule.decision} ({deciding.arg} {deciding.op} {deciding.value!r})"


# -- values --------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_finite_number(value: Any) -> bool:
    return _is_number(value) and (isinstance(value, int) or math.isfinite(value))


def json_equal(left: Any, right: Any) -> bool:
    """Equality of JSON values by JSON type: ``"0" != 0``, ``true != 1``, ``1 == 1.0``."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left is right
    if _is_number(left) or _is_number(right):
        return _is_number(left) and _is_number(right) and left == right
    if isinstance(left, str) or isinstance(right, str):
        return isinstance(left, str) and isinstance(right, str) and left == right
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return False


# -- paths ---------------------------------------------------------------------------------------

_SLASHES = re.compile(r"/{2,}")


def normalize_path(path: str) -> str | None:
    """``path`` normalized lexically (POSIX: ``//`` → ``/``, ``.`` and ``..`` folded), or
    ``None`` when it is no path at all (empty, or holding a NUL)."""
    if not path or "\x00" in path:
        return None
    return posixpath.normpath(_SLASHES.sub("/", path))


def is_under(path: str, directory: str) -> bool:
    """Is ``path`` the (normalized) ``directory`` or inside it, compared by whole components?

    Both are normalized lexically, so ``a/../../b`` climbs out and ``/tmp/a/../ab`` is
    ``/tmp/ab``, which is not under ``/tmp/a``. A relative path is only under a relative
    directory, an absolute one only under an absolute one. Symlinks are not resolved.
    """
    normal = normalize_path(path)
    base = normalize_path(directory)
    if normal is None or base is None:
        return False
    if posixpath.isabs(normal) != posixpath.isabs(base):
        return False
    if normal == ".." or normal.startswith("../"):
        return False
    if base in (".", "/"):
        return True
    return normal == base or normal.startswith(base + "/")


# -- constraint constructors ---------------------------------------------------------------------
# Each validates its operand and raises ValueError with a reason the loader puts on a line.


def equals(arg: str, value: Any) -> Constraint:
    return Constraint(arg, "equals", value, lambda actual: json_equal(actual, value))


def one_of(arg: str, values: list[Any]) -> Constraint:
    if not isinstance(values, list) or not values:
        raise ValueError("one_of takes a non-empty list of values")
    choices = list(values)
    return Constraint(
        arg, "one_of", choices, lambda actual: any(json_equal(actual, c) for c in choices)
    )


def matches(arg: str, pattern: str) -> Constraint:
    """The whole argument must match ``pattern`` (``re.fullmatch``: ``ls`` does not match
    ``ls; rm -rf /``). Only strings match."""
    if not isinstance(pattern, str):
        raise ValueError("matches takes a regular expression as a string")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    return Constraint(
        arg,
        "matches",
        pattern,
        lambda actual: isinstance(actual, str) and compiled.fullmatch(actual) is not None,
    )


def under(arg: str, directory: str) -> Constraint:
    """The argument must be a path inside ``directory`` (see :func:`is_under`)."""
    if not isinstance(directory, str):
        raise ValueError("under takes a directory path as a string")
    base = normalize_path(directory)
    if base is None:
        raise ValueError("under takes a non-empty directory path")
    if base == ".." or base.startswith("../"):
        raise ValueError(f"under: {directory!r} climbs out of the working directory")
    return Constraint(
        arg, "under", directory, lambda actual: isinstance(actual, str) and is_under(actual, base)
    )


def in_range(arg: str, minimum: float | None = None, maximum: float | None = None) -> Constraint:
    """The argument must be a number (``true`` is not one) with ``min <= value <= max``."""
    if minimum is None and maximum is None:
        raise ValueError("range takes min, max or both")
    for name, bound in (("min", minimum), ("max", maximum)):
        if bound is not None and not _is_finite_number(bound):
            raise ValueError(f"range: {name} must be a finite number, not {bound!r}")
    if minimum is not None and maximum is not None and minimum > maximum:
        raise ValueError(f"range: min {minimum} is greater than max {maximum}")

    def test(actual: Any) -> bool:
        if not _is_finite_number(actual):
            return False
        return (minimum is None or actual >= minimum) and (maximum is None or actual <= maximum)

    shown = {k: v for k, v in (("min", minimum), ("max", maximum)) if v is not None}
    return Constraint(arg, "range", shown, test)


def host_in(arg: str, hosts: list[Any]) -> Constraint:
    """The argument must be an ``http``/``https`` URL whose host matches one of ``hosts``: an
    exact name (``docs.python.org``), ``*.example.com`` (any subdomain, not the name itself), or
    either with ``:port`` (without one, any port). Case-insensitive; userinfo cannot fake a host
    (``https://good.com@evil.com`` is ``evil.com``)."""
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        raise ValueError("host_in takes a non-empty list of host names")
    patterns = [_host_pattern(host) for host in hosts]

    def test(actual: Any) -> bool:
        target = _url_host(actual)
        return target is not None and any(_host_matches(p, *target) for p in patterns)

    return Constraint(arg, "host_in", list(hosts), test)


def _host_pattern(text: str) -> tuple[str, int | None]:
    host, colon, port = text.strip().lower().rpartition(":")
    if not colon or "]" in port:
        host, port = text.strip().lower(), ""
    if not host or any(c in host for c in "/@ ?#"):
        raise ValueError(f"host_in: {text!r} is not a host name (write docs.python.org or *.x.io)")
    if port and not port.isdigit():
        raise ValueError(f"host_in: {text!r} has a port that is not a number")
    return host.strip("[]"), int(port) if port else None


def _url_host(url: Any) -> tuple[str, int] | None:
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    default = 443 if parts.scheme.lower() == "https" else 80
    return parts.hostname.lower().rstrip("."), port or default


def _host_matches(pattern: tuple[str, int | None], host: str, port: int) -> bool:
    name, wanted = pattern
    if wanted is not None and wanted != port:
        return False
    if name.startswith("*."):
        return host.endswith(name[1:]) and host != name[2:]
    return host == name
