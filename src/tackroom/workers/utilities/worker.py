"""The ``utilities`` worker: ``calc::add``, ``calc::evaluate`` and ``clock::now``.

Pure functions offered to models as tools (all idempotent and safe to run in parallel); the
benchmark uses ``calc::add`` as its tool call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

from tackroom.contracts.tools import CallContext
from tackroom.contracts.utilities import (
    CALC_ADD,
    CALC_EVALUATE,
    CLOCK_NOW,
    RESULT_TOO_LARGE,
    AddRequest,
    ClockRequest,
    ClockResponse,
    EvaluateRequest,
    NumberResult,
)
from tackroom.engine.errors import FunctionError
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.utilities.calc import MAX_INT_BITS, evaluate

__all__ = ["WORKER", "UtilitiesConfig", "clock_reading"]


class UtilitiesConfig(WorkerConfig):
    """The ``utilities`` worker takes no options."""


def clock_reading(now: Callable[[], float] = time.time) -> ClockResponse:
    epoch = now()
    moment = datetime.fromtimestamp(epoch, tz=UTC)
    return ClockResponse(iso=moment.isoformat().replace("+00:00", "Z"), epoch=epoch)


async def _start(ctx: WorkerContext[UtilitiesConfig]) -> None:
    async def add(request: AddRequest, call: CallContext | None) -> NumberResult:
        result = request.a + request.b
        if isinstance(result, float) and not math.isfinite(result):
            raise FunctionError(RESULT_TOO_LARGE, "the sum is not a finite number")
        if isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
            raise FunctionError(RESULT_TOO_LARGE, f"the sum has more than {MAX_INT_BITS} bits")
        return NumberResult(result=result)

    async def calculate(request: EvaluateRequest, call: CallContext | None) -> NumberResult:
        return NumberResult(result=evaluate(request.expression))

    async def now(request: ClockRequest, call: CallContext | None) -> ClockResponse:
        return clock_reading()

    await serve_tool(ctx, CALC_ADD, add)
    await serve_tool(ctx, CALC_EVALUATE, calculate)
    await serve_tool(ctx, CLOCK_NOW, now)


WORKER = WorkerSpec(
    name="utilities",
    description="A calculator (calc::add, calc::evaluate) and a clock (clock::now) for models.",
    config_model=UtilitiesConfig,
    start=_start,
)
