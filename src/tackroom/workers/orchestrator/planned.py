"""``mode: planned``: the tools a run may call are fixed from the trusted request before the
model reads anything untrusted.

At provisioning, one model call sees only what the user asked (the session's user messages
that carry no untrusted label) and the offered tools' names and descriptions, and answers which
tools the task needs. The gate then refuses every call outside that plan (``decided_by:
plan``); the readers a planned run needs to work with untrusted content
(:data:`PLAN_READERS`) are always in it. While the run lasts, untrusted content reaches the
model only as a handle (:mod:`.clipping`), never as text: what a page says cannot steer it.
A plan that cannot be read is empty: the run may answer, and call nothing but the readers.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from tackroom.contracts.messages import AgentMessage, Usage, UserMessage, text_of
from tackroom.contracts.provider import OutputFormat, ProviderRequest, complete_function
from tackroom.contracts.results import RESULTS_READ
from tackroom.contracts.turn import PLAN_FORMAT
from tackroom.engine.errors import EngineError, unavailable_cause
from tackroom.engine.protocol import Engine
from tackroom.workers.orchestrator.record import ToolOffer, TurnRecord
from tackroom.workers.orchestrator.transcript import SessionsClient

__all__ = ["PLAN_READERS", "Planner", "planner_prompt"]

PLAN_READERS = frozenset({RESULTS_READ.id, "quarantine::extract"})
"""Functions a planned run may always call: they read, and return untrusted content as a handle
or as typed values."""

_PROMPT = """You plan which tools a task needs, before any of them runs. Read the user's request
and answer with one JSON object {"tools": [...]}: the names of every tool (from the list below)
the task may need, and no other. Later you will not be able to call a tool you did not name.

Tools:
"""


def planner_prompt(tools: list[ToolOffer]) -> str:
    listed = "\n".join(f"- {tool.name}: {tool.description.strip()[:300]}" for tool in tools)
    return _PROMPT + (listed or "(none)")


def trusted_request(messages: list[AgentMessage]) -> list[AgentMessage]:
    """The user's own words in ``messages``: user messages with no label (text only)."""
    return [
        UserMessage.text(text_of(message.content))
        for message in messages
        if isinstance(message, UserMessage) and message.label is None
    ]


class Planner:
    def __init__(self, engine: Engine, *, sessions: SessionsClient, timeout: float) -> None:
        self._engine = engine
        self._sessions = sessions
        self._timeout = timeout

    async def plan(self, record: TurnRecord, tools: list[ToolOffer]) -> tuple[list[str], Usage]:
        """The function ids of ``tools`` the task needs, and what the planning call cost."""
        offered = [tool for tool in tools if tool.function_id not in PLAN_READERS]
        history = await self._sessions.messages(record.session_id)
        request = trusted_request([*history, *record.initial_messages])
        if not offered or not request:
            return [], Usage()
        names = [tool.name for tool in offered]
        schema = {
            "type": "object",
            "properties": {"tools": {"type": "array", "items": {"enum": names}}},
            "required": ["tools"],
            "additionalProperties": False,
        }
        call = ProviderRequest(
            model=record.model,
            system_prompt=planner_prompt(offered),
            messages=request,
            output_format=OutputFormat(name=PLAN_FORMAT, json_schema=schema),
            session_id=record.session_id,
        )
        try:
            answer = await complete_function(record.provider).call(
                self._engine, call, timeout=self._timeout
            )
        except EngineError as exc:
            if unavailable_cause(exc) is not None:
                raise
            return [], Usage()
        except ValidationError:
            return [], Usage()
        chosen = _named(text_of(answer.content), set(names))
        return [tool.function_id for tool in offered if tool.name in chosen], answer.usage


def _named(text: str, names: set[str]) -> set[str]:
    """The tool names a plan answer lists (only offered ones); none when it does not read."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return set()
    listed = value.get("tools") if isinstance(value, dict) else None
    if not isinstance(listed, list):
        return set()
    return {name for name in listed if isinstance(name, str) and name in names}
