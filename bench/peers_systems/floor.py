"""The floor: the turn as a hand-written asyncio loop over SQLite, and nothing else.

It loads the session's history, appends each message (user, tool call, tool result, answer) as a
JSON row with its own commit (WAL, ``synchronous=NORMAL``, the durability tackroom's embedded
engine has), streams the answer's deltas to the client through an async generator, and runs the
tool in-line. No framework, no validation, no events, no tracing: the least a durable streaming
turn can cost in Python, so the other systems are read as multiples of it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from .workload import (
    DELTAS,
    TOOL_ARGUMENTS_JSON,
    TOOL_NAME,
    USER_TEXT,
    Outcome,
    Turn,
    add,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


def describe() -> dict[str, Any]:
    return {
        "version": f"sqlite {sqlite3.sqlite_version} (python sqlite3)",
        "persistence": "sqlite3 file, WAL, synchronous=NORMAL; one row and one commit per"
        " message (4 per turn); the history read before the first model call",
        "streaming": "an async generator the client iterates: one event per delta",
    }


async def model(history: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    """The scripted model: a tool call unless the last message is the tool's result."""
    if history[-1]["role"] != "tool":
        yield {"tool_call": {"id": "call-1", "name": TOOL_NAME, "arguments": TOOL_ARGUMENTS_JSON}}
        return
    for delta in DELTAS:
        yield {"delta": delta}


class Loop:
    def __init__(self, database: Path) -> None:
        self.db = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)

    def append(self, session_id: str, seq: int, message: dict[str, Any]) -> None:
        self.db.execute("BEGIN")
        self.db.execute(
            "INSERT INTO messages (session_id, seq, body) VALUES (?, ?, ?)",
            (session_id, seq, json.dumps(message)),
        )
        self.db.execute("COMMIT")

    def history(self, session_id: str) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT body FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        return [json.loads(body) for (body,) in rows]

    async def run(self, session_id: str, prompt: str) -> AsyncIterator[dict[str, Any]]:
        """One turn; yields the events a client streams: deltas, the tool's result, the end."""
        history = self.history(session_id)
        history.append({"role": "user", "content": prompt})
        self.append(session_id, len(history) - 1, history[-1])
        for _ in range(8):
            text: list[str] = []
            calls: list[dict[str, Any]] = []
            async for chunk in model(history):
                if "delta" in chunk:
                    text.append(chunk["delta"])
                    yield chunk
                else:
                    calls.append(chunk["tool_call"])
            history.append({"role": "assistant", "content": "".join(text), "tool_calls": calls})
            self.append(session_id, len(history) - 1, history[-1])
            if not calls:
                yield {"end": history[-1]["content"], "messages": len(history)}
                return
            for call in calls:
                result = str(add(**json.loads(call["arguments"])))
                history.append({"role": "tool", "tool_call_id": call["id"], "content": result})
                self.append(session_id, len(history) - 1, history[-1])
                yield {"tool_result": result}
        raise RuntimeError("too many model calls")


@contextlib.asynccontextmanager
async def open_system(directory: Path) -> AsyncIterator[Turn]:
    loop = Loop(directory / "floor.db")

    async def turn(session_id: str) -> Outcome:
        outcome = Outcome()
        async for event in loop.run(session_id, USER_TEXT):
            if "delta" in event:
                outcome.deltas.append(event["delta"])
            elif "tool_result" in event:
                outcome.tool_result = event["tool_result"]
            elif "end" in event:
                outcome.answer = event["end"]
                outcome.stored_messages = event["messages"]
        return outcome

    try:
        yield turn
    finally:
        loop.db.close()
