"""Spans say what happened, and no secret reaches one: a canary API key and a value registered as
a secret (``tracing.summaries.secret_env``), handed to tools by the model, echoed by one and
raised in an error by another, appear in no attribute, event or status message of the run's
trace — while every model and tool span carries its input and output summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness
from tackroom.contracts.traces import SpanRecord
from tackroom.runtime.config import HarnessConfig

from .test_turn_traces import named, trace_of_run

API_KEY = "sk-canaryCANARY0123456789abcdef"
"""Shaped like an OpenAI key: the redactor's ``openai_key`` pattern finds it."""
REGISTERED = "moonlight-violet-42-harbor"
"""Shaped like nothing: masked only because its variable is named in ``secret_env``."""

SCRIPT = [
    {
        "tool_calls": [
            {"name": "store", "arguments": {"key": API_KEY, "note": f"pin {REGISTERED}"}},
            {"name": "check", "arguments": {"token": REGISTERED}},
        ]
    },
    {"text": f"Stored it; your key {API_KEY} is safe and {REGISTERED} was refused."},
]


def store(key: str, note: str) -> str:
    """Store a key with a note."""
    return f"stored {key} ({note})"


def check(token: str) -> str:
    """Check a token."""
    raise ValueError(f"token {token} is refused")


def _config(**summaries: Any) -> HarnessConfig:
    return HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "tracing": {
                "exporters": ["bus"],
                "bus": {"flush_interval": 0.05},
                "summaries": {"secret_env": ["CANARY_VALUE"], **summaries},
            },
        }
    )


def _everything(span: SpanRecord) -> str:
    """All a span shows: its name, attributes, events and status message."""
    return json.dumps(
        [span.name, span.attributes, [e.model_dump() for e in span.events], span.status_message],
        ensure_ascii=False,
    )


async def _trace(tmp_path: Path, config: HarnessConfig) -> Any:
    holding = {"chat demo": 2, "execute_tool store": 1, "execute_tool check": 1}
    async with Harness(
        "scripted:demo", script=SCRIPT, tools=[store, check], home=tmp_path, config=config
    ) as harness:
        result = await harness.run("Store my key, then check the token.")
        trace = await trace_of_run(harness.engine, result.run_id, holding=holding)
    assert result.ok, result.error
    return trace


async def test_no_secret_reaches_a_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANARY_VALUE", REGISTERED)
    trace = await _trace(tmp_path, _config())
    for span in trace.spans:
        shown = _everything(span)
        assert API_KEY not in shown, span.name
        assert REGISTERED not in shown, span.name
        assert "sk-canary" not in shown, span.name  # not even the start of the key

    (stored,) = named(trace, "execute_tool store")
    assert stored.attributes["tackroom.input.summary"] == (
        '{"key":"[REDACTED:openai_key]","note":"pin [REDACTED:secret]"}'
    )
    assert stored.attributes["tackroom.output.summary"] == (
        "stored [REDACTED:openai_key] (pin [REDACTED:secret])"
    )
    (checked,) = named(trace, "execute_tool check")
    assert checked.status == "error"
    assert checked.status_message is not None
    assert "[REDACTED:secret] is refused" in checked.status_message
    assert checked.attributes["tackroom.output.summary"].startswith("error: ")

    asked, answered = named(trace, "chat demo")
    assert "[REDACTED:openai_key]" in asked.attributes["tackroom.output.summary"]
    follow_up = answered.attributes["tackroom.input.summary"]
    assert follow_up.startswith("4 messages, 2 tools; result tool::store: stored [REDACTED")
    assert "result tool::check (error)" in follow_up
    assert answered.attributes["tackroom.output.summary"] == (
        "Stored it; your key [REDACTED:openai_key] is safe and [REDACTED:secret] was refused."
    )


async def test_summaries_are_cut_to_their_size_and_can_be_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CANARY_VALUE", REGISTERED)
    short = await _trace(tmp_path / "short", _config(max_chars=24))
    for span in short.spans:
        for name in ("tackroom.input.summary", "tackroom.output.summary"):
            summary = span.attributes.get(name)
            assert summary is None or len(summary) <= 24, (span.name, summary)
        assert REGISTERED not in _everything(span)
    (stored,) = named(short, "execute_tool store")
    assert stored.attributes["tackroom.input.summary"] == '{"key":"[REDACTED:opena…'

    off = await _trace(tmp_path / "off", _config(enabled=False))
    summaries = [
        (span.name, key)
        for span in off.spans
        for key in span.attributes
        if key.startswith("tackroom.") and key.endswith(".summary")
    ]
    assert summaries == []
    (checked,) = named(off, "execute_tool check")
    assert checked.status_message is not None
    assert REGISTERED not in checked.status_message  # status messages are scrubbed regardless
