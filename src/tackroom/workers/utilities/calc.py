"""Safe arithmetic: parse with :mod:`ast`, evaluate numbers and operators only, within limits.

No names, calls, attributes or any other node ever reaches an evaluator; integers are capped at
:data:`MAX_INT_BITS` bits and checked *before* a multiplication or a power is computed, so no
expression can make the worker compute a huge number.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from tackroom.contracts.utilities import (
    DIVISION_BY_ZERO,
    INVALID_EXPRESSION,
    RESULT_TOO_LARGE,
)
from tackroom.engine.errors import FunctionError

__all__ = ["MAX_EXPONENT", "MAX_INT_BITS", "evaluate"]

MAX_INT_BITS = 4000
"""Largest integer the calculator produces (about 1,200 decimal digits)."""
MAX_EXPONENT = 10_000

Number = int | float

_BINARY: dict[type[ast.operator], tuple[str, Callable[[Number, Number], Number]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.Pow: ("**", operator.pow),
}
_HINTS: dict[type[ast.AST], str] = {
    ast.BitXor: "'^' is not allowed; use ** for powers",
    ast.Name: "names are not allowed; write the numbers themselves",
    ast.Call: "function calls are not allowed",
    ast.Attribute: "attributes are not allowed",
    ast.Compare: "comparisons are not allowed",
}


def _invalid(message: str) -> FunctionError:
    return FunctionError(INVALID_EXPRESSION, message)


def _too_large(message: str = "the result is too large") -> FunctionError:
    return FunctionError(RESULT_TOO_LARGE, message)


def _checked(value: Number) -> Number:
    if isinstance(value, complex):
        raise _invalid("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise _too_large("the result is not a finite number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise _too_large(f"the result has more than {MAX_INT_BITS} bits")
    return value


def _bits(value: Number) -> int:
    return value.bit_length() if isinstance(value, int) else 0


def _guard(op: type[ast.operator], left: Number, right: Number) -> None:
    """Refuse an operation whose integer result would be over the limit, before computing it."""
    both_int = isinstance(left, int) and isinstance(right, int)
    if op is ast.Mult and both_int and _bits(left) + _bits(right) > MAX_INT_BITS + 1:
        raise _too_large()
    if op is ast.Pow:
        if abs(right) > MAX_EXPONENT and abs(left) not in (0, 1):
            raise _too_large(f"exponents are limited to {MAX_EXPONENT}")
        # |left| >= 2 ** (bits - 1), so the result has at least (bits - 1) * right bits.
        if both_int and right > 0 and (_bits(left) - 1) * right > MAX_INT_BITS:
            raise _too_large()


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return _checked(value)
        raise _invalid(f"{value!r} is not a number")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _eval(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp):
        entry = _BINARY.get(type(node.op))
        if entry is None:
            hint = _HINTS.get(type(node.op), f"operator {type(node.op).__name__} is not allowed")
            raise _invalid(hint)
        symbol, function = entry
        left, right = _eval(node.left), _eval(node.right)
        _guard(type(node.op), left, right)
        try:
            return _checked(function(left, right))
        except ZeroDivisionError:
            raise FunctionError(DIVISION_BY_ZERO, f"division by zero in '{symbol}'") from None
        except OverflowError:
            raise _too_large() from None
    hint = _HINTS.get(type(node), f"{type(node).__name__} is not allowed")
    raise _invalid(f"{hint}; use numbers, + - * / // % ** and parentheses")


def evaluate(expression: str) -> Number:
    """The value of an arithmetic ``expression``; ``FunctionError`` with a typed code otherwise."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise _invalid(f"not an arithmetic expression: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise _invalid("the expression is too deeply nested") from None
    try:
        return _eval(tree)
    except RecursionError:
        raise _invalid("the expression is too deeply nested") from None
