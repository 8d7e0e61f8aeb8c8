"""Pure pieces of the engine: cron schedules, backoff, JSON checks, URLs, wire errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import BaseModel

from tackroom.engine import (
    FunctionNotFound,
    InvalidPayload,
    InvalidSchedule,
    InvocationError,
    QueueConfig,
    RevisionConflict,
)
from tackroom.engine.cron import CronSchedule
from tackroom.engine.embedded.queues import backoff_delay
from tackroom.engine.errors import error_from_wire
from tackroom.engine.factory import (
    DEFAULT_EMBEDDED_PATH,
    UnsupportedEngineURL,
    open_engine,
    parse_embedded_url,
)
from tackroom.engine.jsonvalue import to_json_value


def test_cron_five_and_six_fields() -> None:
    start = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert CronSchedule("*/15 * * * *").next_after(start) == datetime(
        2026, 1, 1, 12, 15, tzinfo=UTC
    )
    assert CronSchedule("*/10 * * * * *").next_after(start) == datetime(
        2026, 1, 1, 12, 0, 10, tzinfo=UTC
    )


@pytest.mark.parametrize("expression", ["", "* * *", "61 * * * *", "a b c d e"])
def test_bad_cron_is_a_typed_error(expression: str) -> None:
    with pytest.raises(InvalidSchedule):
        CronSchedule(expression)


def test_backoff_grows_exponentially_and_caps() -> None:
    config = QueueConfig(backoff_initial=1.0, backoff_max=10.0)
    assert 0.8 <= backoff_delay(config, 1) <= 1.2
    assert 3.2 <= backoff_delay(config, 3) <= 4.8
    assert 8.0 <= backoff_delay(config, 20) <= 12.0


class Point(BaseModel):
    x: int
    label: str


def test_json_values_are_copied_and_checked() -> None:
    inner = [1, 2]
    copied = to_json_value({"a": inner, "t": (1, "x")})
    assert copied == {"a": [1, 2], "t": [1, "x"]}
    assert copied["a"] is not inner
    assert to_json_value(Point(x=1, label="p")) == {"x": 1, "label": "p"}
    for bad in ({1: "x"}, {"s": {1}}, float("nan"), object()):
        with pytest.raises(InvalidPayload):
            to_json_value(bad)


def test_engine_urls() -> None:
    assert parse_embedded_url("embedded:") == DEFAULT_EMBEDDED_PATH
    assert parse_embedded_url("embedded:/tmp/x.db") == Path("/tmp/x.db")
    assert parse_embedded_url("embedded::memory:") is None
    with pytest.raises(UnsupportedEngineURL, match="redis"):
        open_engine("redis://localhost")


def test_typed_errors_survive_the_wire() -> None:
    errors = [
        FunctionNotFound("state::gett", ["state::get"]),
        InvocationError("a::b", "bad_input", "no"),
        RevisionConflict("s", "k", 1, 2),
        InvalidSchedule("x"),
    ]
    for error in errors:
        rebuilt = error_from_wire(error.to_wire())
        assert type(rebuilt) is type(error)
        assert rebuilt.to_wire() == error.to_wire()
