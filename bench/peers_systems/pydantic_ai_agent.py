"""Pydantic AI: ``Agent.run_stream`` with ``FunctionModel``, the history kept in SQLite by us.

Pydantic AI has no session store of its own: a program loads the history, passes it as
``message_history`` and stores ``new_messages_json()`` after the run. That is what this does, on a
sqlite3 file (WAL, ``synchronous=NORMAL``): one row per run, one commit, written after the run
(so a crash mid-run loses the run, unlike the others, which persist as they go). The model is
``FunctionModel(stream_function=...)``: the tool call as one ``DeltaToolCall``, then 50 deltas;
the client reads ``stream_text(delta=True, debounce_by=None)``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from .workload import DELTAS, TOOL_ARGUMENTS_JSON, TOOL_NAME, USER_TEXT, Outcome, Turn, add

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    messages TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


def describe() -> dict[str, Any]:
    return {
        "version": f"pydantic-ai-slim {version('pydantic-ai-slim')}",
        "persistence": "none built in: the benchmark loads the history from a sqlite3 file"
        " (WAL, synchronous=NORMAL) before the run and stores new_messages_json() after it,"
        " one row and one commit per run",
        "streaming": "Agent.run_stream(...).stream_text(delta=True, debounce_by=None)",
        "model": "pydantic_ai.models.function.FunctionModel(stream_function=...)",
    }


async def stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """A tool call unless the last message carries the tool's result; then the 50 deltas."""
    last = messages[-1]
    if not (
        isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts)
    ):
        yield {
            0: DeltaToolCall(name=TOOL_NAME, json_args=TOOL_ARGUMENTS_JSON, tool_call_id="call-1")
        }
        return
    for delta in DELTAS:
        yield delta


class Store:
    def __init__(self, database: Path) -> None:
        self.db = sqlite3.connect(database, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)

    def load(self, session_id: str) -> tuple[list[ModelMessage], int]:
        rows = self.db.execute(
            "SELECT messages FROM runs WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        history: list[ModelMessage] = []
        for (body,) in rows:
            history.extend(ModelMessagesTypeAdapter.validate_json(body))
        return history, len(rows)

    def save(self, session_id: str, seq: int, messages: bytes) -> None:
        self.db.execute("BEGIN")
        self.db.execute(
            "INSERT INTO runs (session_id, seq, messages) VALUES (?, ?, ?)",
            (session_id, seq, messages.decode()),
        )
        self.db.execute("COMMIT")


@contextlib.asynccontextmanager
async def open_system(directory: Path) -> AsyncIterator[Turn]:
    store = Store(directory / "pydantic_ai.db")
    agent = Agent(FunctionModel(stream_function=stream), tools=[add])

    async def turn(session_id: str) -> Outcome:
        outcome = Outcome()
        history, runs = store.load(session_id)
        async with agent.run_stream(USER_TEXT, message_history=history or None) as result:
            async for text in result.stream_text(delta=True, debounce_by=None):
                outcome.deltas.append(text)
            new = result.new_messages()
            store.save(session_id, runs, result.new_messages_json())
        outcome.answer = "".join(
            part.content
            for message in new
            if isinstance(message, ModelResponse)
            for part in message.parts
            if isinstance(part, TextPart)
        )
        outcome.tool_result = next(
            str(part.content)
            for message in new
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        )
        outcome.stored_messages = len(history) + len(new)
        return outcome

    try:
        yield turn
    finally:
        store.db.close()
