"""The scripted provider: replay a script through the provider stream protocol (tests, demos).

See ``docs/workers/scripted.md``.
"""

from __future__ import annotations

from tackroom.testing.scripted.collect import CollectedStream, collect_stream
from tackroom.testing.scripted.cursors import CursorMode, CursorState
from tackroom.testing.scripted.held import HeldSleep
from tackroom.testing.scripted.provider import (
    ScriptAssertionError,
    ScriptedProvider,
    Violation,
    status_function,
)
from tackroom.testing.scripted.script import (
    SCRIPT_SCHEMA_VERSION,
    Chunking,
    InvalidScript,
    Script,
    ScriptExpect,
    ScriptFailure,
    ScriptToolCall,
    ScriptTurn,
)

__all__ = [
    "SCRIPT_SCHEMA_VERSION",
    "Chunking",
    "CollectedStream",
    "CursorMode",
    "CursorState",
    "HeldSleep",
    "InvalidScript",
    "Script",
    "ScriptAssertionError",
    "ScriptExpect",
    "ScriptFailure",
    "ScriptToolCall",
    "ScriptTurn",
    "ScriptedProvider",
    "Violation",
    "collect_stream",
    "status_function",
]
