"""The ``utilities`` worker: calc::add, calc::evaluate (safe arithmetic) and clock::now."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from tackroom.contracts.tools import traits_of
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import Host
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.utilities.calc import MAX_INT_BITS, evaluate
from tackroom.workers.utilities.worker import WORKER, clock_reading

CALL = {"_call": {"session_id": "s1", "function_call_id": "c1"}}


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER]) as host:
        yield host.engine


async def fails(engine: Engine, function_id: str, payload: Any, code: str) -> str:
    with pytest.raises(InvocationError) as caught:
        await engine.trigger(function_id, payload)
    assert caught.value.remote_code == code, caught.value
    return caught.value.message


async def test_add(engine: Engine) -> None:
    assert await engine.trigger("calc::add", {"a": 2, "b": 3, **CALL}) == {
        "schema_version": 1,
        "result": 5,
    }
    assert (await engine.trigger("calc::add", {"a": 0.5, "b": 2}))["result"] == 2.5
    await fails(engine, "calc::add", {"a": "2", "b": 3}, "invalid_request")
    await fails(engine, "calc::add", {"a": True, "b": 3}, "invalid_request")
    await fails(engine, "calc::add", {"a": 1e308, "b": 1e308}, "result_too_large")


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("-(3 - 5)", 2),
        ("+4", 4),
        ("1_000 * 1.5", 1500.0),
        ("  0.1 + 0.2  ", 0.1 + 0.2),
        ("2 ** 3 ** 2", 512),
        ("1 ** 100000", 1),
    ],
)
async def test_evaluate(engine: Engine, expression: str, result: float) -> None:
    answer = await engine.trigger("calc::evaluate", {"expression": expression, **CALL})
    assert answer == {"schema_version": 1, "result": result}
    assert type(answer["result"]) is type(result)


@pytest.mark.parametrize(
    ("expression", "code", "fragment"),
    [
        ("__import__('os').system('id')", "invalid_expression", "calls"),
        ("x + 1", "invalid_expression", "names"),
        ("(1).real", "invalid_expression", "attributes"),
        ("2 ^ 3", "invalid_expression", "use **"),
        ("1 < 2", "invalid_expression", "comparisons"),
        ("'a' * 3", "invalid_expression", "not a number"),
        ("True + 1", "invalid_expression", "not a number"),
        ("1j * 2", "invalid_expression", "not a number"),
        ("[1, 2]", "invalid_expression", "List"),
        ("lambda: 1", "invalid_expression", "Lambda"),
        ("1 +", "invalid_expression", "not an arithmetic expression"),
        ("1 << 100", "invalid_expression", "LShift"),
        ("1 / 0", "division_by_zero", "'/'"),
        ("5 % 0", "division_by_zero", "'%'"),
        ("9 ** 9 ** 9", "result_too_large", "exponents"),
        ("2 ** 5000", "result_too_large", "too large"),
        ("10.0 ** 400", "result_too_large", "too large"),
        ("(2 ** 3000) * (2 ** 3000)", "result_too_large", "too large"),
        ("1e308 * 10", "result_too_large", "finite"),
        ("(-8) ** 0.5", "invalid_expression", "real number"),
        ("(" * 300 + "1" + ")" * 300, "invalid_expression", "nested"),
        ("-" * 999 + "1", "invalid_expression", "nested"),
    ],
)
async def test_evaluate_rejects(engine: Engine, expression: str, code: str, fragment: str) -> None:
    message = await fails(engine, "calc::evaluate", {"expression": expression}, code)
    assert fragment in message


async def test_evaluate_request_limits(engine: Engine) -> None:
    await fails(engine, "calc::evaluate", {"expression": "1+" * 600 + "1"}, "invalid_request")
    await fails(engine, "calc::evaluate", {"expression": ""}, "invalid_request")


def test_integer_cap() -> None:
    assert evaluate("2 ** 3999").bit_length() == MAX_INT_BITS  # type: ignore[union-attr]
    assert evaluate("3 ** 2000") == 3**2000


async def test_clock(engine: Engine) -> None:
    before = time.time()
    reading = await engine.trigger("clock::now", None)
    after = time.time()
    assert before <= reading["epoch"] <= after
    moment = datetime.fromisoformat(reading["iso"].replace("Z", "+00:00"))
    assert moment.utcoffset() is not None
    assert abs(moment.timestamp() - reading["epoch"]) < 1e-3
    assert reading["iso"].endswith("Z")
    assert (await engine.trigger("clock::now", {**CALL}))["epoch"] >= reading["epoch"]
    await fails(engine, "clock::now", {"tz": "CET"}, "invalid_request")


def test_clock_reading_is_utc() -> None:
    assert clock_reading(lambda: 0.0).iso == "1970-01-01T00:00:00Z"
    assert clock_reading(lambda: 1.5).iso == "1970-01-01T00:00:01.500000Z"


async def test_schemas_carry_traits(engine: Engine) -> None:
    infos = {i.function_id: i for i in await engine.list_functions() if i.worker == "utilities"}
    assert set(infos) == {"calc::add", "calc::evaluate", "clock::now"}
    for info in infos.values():
        traits = traits_of(info.request_schema)
        assert traits.idempotent
        assert traits.parallel
        assert info.description
