"""References, templates and conditions of a task graph — pure, no I/O, no ``eval``.

A reference is ``${ROOT.PATH}``; roots are ``inputs``, ``steps`` (``steps.ID.output…``),
``item`` and ``index`` (inside a ``for_each`` step) and ``task`` (``task.run_id``,
``task.instance``, ``task.attempt``, ``task.idempotency_key``). A path goes on with ``.name`` or
``[N]``; a path through a skipped step's output (``null``) is ``null``. A string that is
exactly one reference takes the referenced value with its type;
references inside a longer string are written into it (strings as they are, anything else as
JSON). ``$${`` writes a literal ``${``.

A condition (``when``) is ``[not] OPERAND [OP OPERAND]``: an operand is a reference or a JSON
literal (``3``, ``"x"``, ``true``, ``null``; ``'x'`` too), ``OP`` one of ``== != < <= > >= in``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ROOTS", "Condition", "Ref", "RefError", "parse_ref", "references", "render"]

ROOTS = frozenset({"inputs", "steps", "item", "index", "task"})
_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]")
_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_OPS = ("==", "!=", "<=", ">=", "<", ">", " in ")


class RefError(ValueError):
    """A reference that does not parse, or names nothing in the values it is resolved against."""


@dataclass(frozen=True, slots=True)
class Ref:
    text: str
    root: str
    parts: tuple[str | int, ...]

    @property
    def step(self) -> str | None:
        """The step a ``steps.ID…`` reference names."""
        if self.root != "steps" or not self.parts:
            return None
        return str(self.parts[0])

    def resolve(self, scope: Mapping[str, Any]) -> Any:
        if self.root not in scope:
            raise RefError(f"${{{self.text}}}: {self.root} is not available here")
        value = scope[self.root]
        for part in self.parts:
            if value is None and self.root == "steps":
                return None  # through a skipped step's output (null)
            if isinstance(part, int):
                if not isinstance(value, list) or part >= len(value):
                    raise RefError(f"${{{self.text}}}: no item [{part}]")
                value = value[part]
            else:
                if not isinstance(value, Mapping) or part not in value:
                    raise RefError(f"${{{self.text}}}: no key {part!r}")
                value = value[part]
        return value


def parse_ref(text: str) -> Ref:
    body = text.strip()
    head = _HEAD.match(body)
    if head is None:
        raise RefError(f"${{{text}}}: a reference starts with one of {', '.join(sorted(ROOTS))}")
    root, at, parts = head.group(0), head.end(), []
    while at < len(body):
        match = _PART.match(body, at)
        if match is None:
            raise RefError(f"${{{text}}}: cannot read {body[at:]!r} (use .name or [N])")
        parts.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        at = match.end()
    if root not in ROOTS:
        raise RefError(f"${{{text}}}: unknown root {root!r} (one of {', '.join(sorted(ROOTS))})")
    if root == "steps" and (len(parts) < 2 or parts[1] != "output"):
        raise RefError(f"${{{text}}}: a step's value is steps.ID.output[.FIELD…]")
    return Ref(body, root, tuple(parts))


def references(value: Any) -> list[Ref]:
    """Every reference in a template (strings inside dicts and lists too)."""
    found: list[Ref] = []
    if isinstance(value, str):
        for match in _REF.finditer(value):
            if match.group(1) is not None:
                found.append(parse_ref(match.group(1)))
    elif isinstance(value, Mapping):
        for item in value.values():
            found.extend(references(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(references(item))
    return found


def render(value: Any, scope: Mapping[str, Any]) -> Any:
    """``value`` with its references filled in from ``scope``."""
    if isinstance(value, str):
        return _render_text(value, scope)
    if isinstance(value, Mapping):
        return {key: render(item, scope) for key, item in value.items()}
    if isinstance(value, list):
        return [render(item, scope) for item in value]
    return value


def _render_text(text: str, scope: Mapping[str, Any]) -> Any:
    whole = _REF.fullmatch(text)
    if whole is not None and whole.group(1) is not None:
        return parse_ref(whole.group(1)).resolve(scope)

    def fill(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return "${"
        found = parse_ref(match.group(1)).resolve(scope)
        return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

    return _REF.sub(fill, text)


@dataclass(frozen=True, slots=True)
class _Operand:
    ref: Ref | None = None
    literal: Any = None

    def value(self, scope: Mapping[str, Any]) -> Any:
        return self.ref.resolve(scope) if self.ref is not None else self.literal


def _operand(text: str, condition: str) -> _Operand:
    text = text.strip()
    match = _REF.fullmatch(text)
    if match is not None and match.group(1) is not None:
        return _Operand(ref=parse_ref(match.group(1)))
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return _Operand(literal=text[1:-1])
    try:
        return _Operand(literal=json.loads(text))
    except ValueError:
        raise RefError(
            f"condition {condition!r}: {text!r} is neither a ${{...}} reference nor a literal"
            " (a string needs quotes)"
        ) from None


@dataclass(frozen=True, slots=True)
class Condition:
    text: str
    negate: bool
    left: _Operand
    op: str | None
    right: _Operand | None

    @classmethod
    def parse(cls, text: str) -> Condition:
        body = text.strip()
        negate = body.startswith("not ")
        if negate:
            body = body[4:]
        for op in _OPS:
            left, found, right = _split_outside_refs(body, op)
            if found:
                return cls(text, negate, _operand(left, text), op.strip(), _operand(right, text))
        return cls(text, negate, _operand(body, text), None, None)

    @property
    def refs(self) -> list[Ref]:
        return [o.ref for o in (self.left, self.right) if o is not None and o.ref is not None]

    def evaluate(self, scope: Mapping[str, Any]) -> bool:
        left = self.left.value(scope)
        if self.op is None or self.right is None:
            result = bool(left)
        else:
            result = _compare(self.op, left, self.right.value(scope), self.text)
        return result != self.negate


def _split_outside_refs(text: str, op: str) -> tuple[str, bool, str]:
    depth = 0
    for at in range(len(text)):
        if text.startswith("${", at):
            depth += 1
        elif text[at] == "}" and depth:
            depth -= 1
        elif depth == 0 and text.startswith(op, at):
            return text[:at], True, text[at + len(op) :]
    return text, False, ""


def _compare(op: str, left: Any, right: Any, text: str) -> bool:
    if op == "==":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if op == "in":
        if not isinstance(right, (list, str, Mapping)):
            raise RefError(f"condition {text!r}: the right side of `in` is not a list or text")
        if isinstance(right, str):
            return isinstance(left, str) and left in right
        return left in right
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
    if not numbers and not (isinstance(left, str) and isinstance(right, str)):
        raise RefError(f"condition {text!r}: cannot order {left!r} and {right!r}")
    ordered = {
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }
    return bool(ordered[op])
