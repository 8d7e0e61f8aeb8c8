"""The contract suite's own checks reject streams that break the protocol."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tackroom.testing import CollectedStream
from tackroom.testing.contracts.provider import check_protocol

USAGE = {
    "input_tokens": 1,
    "output_tokens": 2,
    "cache_read_tokens": 0,
    "cache_write_tokens": 0,
    "cost_usd": 0.0,
}
MESSAGE = {
    "schema_version": 1,
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Hi there"},
        {"type": "function_call", "id": "c1", "function_id": "calc__add", "arguments": {"a": 1}},
    ],
    "stop_reason": "function_call",
    "usage": USAGE,
    "provider": "p",
    "model": "m",
    "timestamp": 0.0,
}
GOOD: list[dict[str, Any]] = [
    {"type": "start", "provider": "p", "model": "m"},
    {"type": "text_delta", "delta": "Hi "},
    {"type": "text_delta", "delta": "there"},
    {"type": "function_call_delta", "index": 0, "id": "c1", "name": "calc__add"},
    {"type": "function_call_delta", "index": 0, "arguments_delta": '{"a": '},
    {"type": "function_call_delta", "index": 0, "arguments_delta": "1}"},
    {"type": "usage", "usage": USAGE},
    {"type": "stop", "stop_reason": "function_call"},
    {"type": "done", "message": MESSAGE},
]
OK = {"schema_version": 1, "ok": True}


def stream(frames: list[dict[str, Any]], *, closed: bool = True) -> CollectedStream:
    return CollectedStream(frames=frames, result=OK, closed=closed)


def test_a_good_stream_passes() -> None:
    check_protocol(stream(copy.deepcopy(GOOD)), provider="p", model="m")


def _without(index: int) -> list[dict[str, Any]]:
    frames = copy.deepcopy(GOOD)
    del frames[index]
    return frames


def _changed(index: int, **fields: Any) -> list[dict[str, Any]]:
    frames = copy.deepcopy(GOOD)
    frames[index].update(fields)
    return frames


@pytest.mark.parametrize(
    "frames",
    [
        pytest.param(_without(0), id="no-start"),
        pytest.param(_without(8), id="no-terminal"),
        pytest.param([*copy.deepcopy(GOOD), {"type": "error", "kind": "auth", "message": "x"}],
                     id="two-terminals"),
        pytest.param(_without(1), id="text-mismatch"),
        pytest.param(_changed(3, id=None), id="call-without-id"),
        pytest.param(_changed(5, arguments_delta="2}"), id="arguments-mismatch"),
        pytest.param(_changed(7, stop_reason="end"), id="stop-mismatch"),
        pytest.param(_changed(6, usage={**USAGE, "input_tokens": 9}), id="usage-mismatch"),
        pytest.param(_changed(1, type="bogus"), id="unknown-frame"),
    ],
)  # fmt: skip
def test_broken_streams_fail(frames: list[dict[str, Any]]) -> None:
    with pytest.raises(Exception):  # noqa: B017, PT011 - an assertion or a validation error
        check_protocol(stream(frames), provider="p", model="m")


def test_an_unclosed_channel_fails() -> None:
    with pytest.raises(AssertionError, match="not closed"):
        check_protocol(stream(copy.deepcopy(GOOD), closed=False), provider="p", model="m")
