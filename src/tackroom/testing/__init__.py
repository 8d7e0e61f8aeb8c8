"""Test helpers for code built on the tackroom engine (also used by the conformance suite).

- :func:`running_engine` / :func:`memory_engine`: a started engine, closed on exit;
- :class:`SpanRecorder`: an in-memory tracer provider to assert on spans;
- :class:`RecordingHandler`: a handler that records its calls (payload, invocation, baggage);
- :func:`wait_until`, :func:`next_item`, :func:`take`: deadline-based waiting, no racy sleeps;
- :class:`FunctionModel`: a model answering with a Python function (``Harness(FunctionModel(f))``);
- :class:`ScriptedProvider`, :class:`Script`, :class:`ScriptTurn`: a provider that replays a
  script through the provider stream protocol; :func:`collect_stream` reads a provider stream;
  :class:`HeldSleep` pauses its stream mid-answer until a test releases it;
- :class:`Cassette`: a recorded run (``tackroom replay RUN --export``) loaded as a scripted
  provider or replayed offline, to turn an incident into a regression test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tackroom.testing.engines import FAST_QUEUE, MEMORY_URL, memory_engine, running_engine
from tackroom.testing.handlers import Call, RecordingHandler, Responder
from tackroom.testing.scripted import (
    CollectedStream,
    HeldSleep,
    InvalidScript,
    Script,
    ScriptAssertionError,
    ScriptedProvider,
    ScriptTurn,
    Violation,
    collect_stream,
)
from tackroom.testing.waiting import DEFAULT_WAIT, WaitTimeout, next_item, take, wait_until

__all__ = [
    "DEFAULT_WAIT",
    "FAST_QUEUE",
    "MEMORY_URL",
    "Call",
    "Cassette",
    "CollectedStream",
    "FunctionModel",
    "HeldSleep",
    "InvalidScript",
    "ModelInfo",
    "RecordingHandler",
    "Responder",
    "Script",
    "ScriptAssertionError",
    "ScriptTurn",
    "ScriptedProvider",
    "SpanRecorder",
    "ToolCall",
    "Violation",
    "WaitTimeout",
    "collect_stream",
    "memory_engine",
    "next_item",
    "running_engine",
    "take",
    "wait_until",
]

if TYPE_CHECKING:
    from tackroom.harness.models import ToolCall
    from tackroom.testing.cassette import Cassette
    from tackroom.testing.function_model import FunctionModel, ModelInfo
    from tackroom.testing.spans import SpanRecorder


def __getattr__(name: str) -> Any:
    """``SpanRecorder`` needs the OpenTelemetry SDK and ``FunctionModel`` the provider kit: they
    are imported on first use, so a harness booting the scripted provider does not pay for them."""
    if name == "SpanRecorder":
        from tackroom.testing.spans import SpanRecorder

        return SpanRecorder
    if name in ("FunctionModel", "ModelInfo"):
        from tackroom.testing import function_model

        return getattr(function_model, name)
    if name == "Cassette":
        from tackroom.testing.cassette import Cassette

        return Cassette
    if name == "ToolCall":
        from tackroom.harness.models import ToolCall

        return ToolCall
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
