"""The ``utilities`` worker's public face: its tools (ids, models, traits) and error codes."""

from __future__ import annotations

from pydantic import Field, StrictFloat, StrictInt

from tackroom.contracts._base import Strict
from tackroom.contracts._base import Strict as _Request
from tackroom.contracts.bus import Tool

__all__ = [
    "CALC_ADD",
    "CALC_EVALUATE",
    "CLOCK_NOW",
    "DIVISION_BY_ZERO",
    "INVALID_EXPRESSION",
    "RESULT_TOO_LARGE",
    "AddRequest",
    "ClockRequest",
    "ClockResponse",
    "EvaluateRequest",
    "Number",
    "NumberResult",
]

INVALID_EXPRESSION = "invalid_expression"
"""Not arithmetic: a syntax error, a name, a call, or an operator that is not allowed."""
DIVISION_BY_ZERO = "division_by_zero"
RESULT_TOO_LARGE = "result_too_large"
"""An exponent, an integer or a float result over the calculator's limits."""

Number = StrictInt | StrictFloat


class _Response(Strict):
    schema_version: int = 1


class AddRequest(_Request):
    a: Number = Field(description="First number.")
    b: Number = Field(description="Second number.")


class EvaluateRequest(_Request):
    expression: str = Field(
        min_length=1,
        max_length=1000,
        description="Arithmetic such as '(2 + 3) * 4 ** 2 / 7'. Numbers, + - * / // % ** and "
        "parentheses only; no variables or functions.",
    )


class NumberResult(_Response):
    result: Number


class ClockRequest(_Request):
    pass


class ClockResponse(_Response):
    iso: str = Field(description="The current time in ISO 8601, UTC, e.g. 2025-01-31T12:00:00Z.")
    epoch: float = Field(description="Seconds since 1970-01-01T00:00:00Z.")


CALC_ADD: Tool[AddRequest, NumberResult] = Tool(
    "calc::add",
    AddRequest,
    NumberResult,
    description="Add two numbers a and b exactly and return the sum as result.",
    idempotent=True,
    read_only=True,
)
CALC_EVALUATE: Tool[EvaluateRequest, NumberResult] = Tool(
    "calc::evaluate",
    EvaluateRequest,
    NumberResult,
    description=(
        "Evaluate an arithmetic expression exactly, e.g. '(17 + 5) * 3 ** 2 / 4'. Supports "
        "integers and decimals, + - * / // (floor division) % (remainder) ** (power), unary "
        "minus and parentheses; no variables or functions. Use it instead of mental math."
    ),
    idempotent=True,
    read_only=True,
)
CLOCK_NOW: Tool[ClockRequest, ClockResponse] = Tool(
    "clock::now",
    ClockRequest,
    ClockResponse,
    description="The current date and time in UTC: ISO 8601 text and seconds since the epoch.",
    idempotent=True,
    read_only=True,
)
