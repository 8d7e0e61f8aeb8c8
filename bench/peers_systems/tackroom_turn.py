"""tackroom: ``tackroom.Harness`` in its default durable configuration, streamed.

``Harness(FunctionModel(answer), config=HarnessConfig.defaults(), home=<temp dir>, tools=[add])``:
the default boot list (engine, sessions, catalog, credentials, directory, orchestrator, files,
utilities, approvals, plus the model's provider worker) on the embedded engine, a SQLite file
(WAL, ``synchronous=NORMAL``) under ``home``; ``add`` served as a function on the bus. The client
iterates ``Harness.stream`` (typed events) and reads the result at ``agent_end``. Tracing is the
OpenTelemetry API's default (no SDK provider set: spans are no-ops), as in a program that sets
none.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tackroom import Harness
from tackroom.contracts.events import MessageUpdate
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, text_of
from tackroom.harness.models import ModelChunk
from tackroom.runtime import HarnessConfig
from tackroom.testing import FunctionModel, ModelInfo, ToolCall

from .workload import DELTAS, TOOL_ARGUMENTS, TOOL_NAME, USER_TEXT, Outcome, Turn, add


def describe() -> dict[str, Any]:
    return {
        "version": f"tackroom {version('tackroom')}",
        "persistence": "the embedded engine on a SQLite file (WAL, synchronous=NORMAL): the"
        " durable turn's state, the session tree, the tool-call ledger, agent::events, the"
        " turn-step queue",
        "streaming": "Harness.stream: typed agent::events (text deltas coalesced per read)",
        "model": "tackroom.testing.FunctionModel (a provider worker served from a function)",
        "config": "HarnessConfig.defaults() (the default boot list), home=<temp dir>",
    }


def answer(messages: list[AgentMessage], info: ModelInfo) -> Sequence[ModelChunk]:
    """A tool call unless the last message is the tool's result; then the 50 deltas."""
    if not isinstance(messages[-1], FunctionResultMessage):
        return [ToolCall(TOOL_NAME, dict(TOOL_ARGUMENTS))]
    return DELTAS


@contextlib.asynccontextmanager
async def open_system(directory: Path) -> AsyncIterator[Turn]:
    harness = Harness(
        FunctionModel(answer),
        config=HarnessConfig.defaults(),
        home=directory / "tackroom",
        tools=[add],
    )

    async def turn(session_id: str) -> Outcome:
        outcome = Outcome()
        stream = harness.stream(USER_TEXT, session=session_id)
        async for event in stream:
            if isinstance(event, MessageUpdate) and event.data.kind == "text":
                outcome.deltas.append(event.data.delta)
        result = stream.result
        outcome.answer = result.output if isinstance(result.output, str) else ""
        results = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
        if len(results) == 1 and not results[0].is_error:
            outcome.tool_result = text_of(results[0].content)
        return outcome

    async with harness:
        yield turn
