"""The OpenAI Agents SDK: ``Runner.run_streamed`` with a ``SQLiteSession`` on a file.

An ``Agent`` with ``function_tool(add)`` and a ``Model`` of our own whose ``stream_response``
yields what the Responses API streams (``response.created``, ``output_item.added``, the function
call's arguments or 50 ``output_text.delta`` events, ``output_item.done``, ``response.completed``),
at once. Tracing is disabled (``RunConfig(tracing_disabled=True)``), as it exports to OpenAI
otherwise. A new session is a new ``SQLiteSession(session_id, file)``; the previous one is closed
when the next session starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    AgentOutputSchemaBase,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RawResponsesStreamEvent,
    RunConfig,
    Runner,
    SQLiteSession,
    Tool,
    ToolCallOutputItem,
    TResponseInputItem,
    function_tool,
    set_tracing_disabled,
)
from agents.items import TResponseOutputItem, TResponseStreamEvent
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
)

from .workload import ANSWER, DELTAS, TOOL_ARGUMENTS_JSON, TOOL_NAME, USER_TEXT, Outcome, Turn, add

TEXT_DELTAS = [
    ResponseTextDeltaEvent(
        type="response.output_text.delta",
        item_id="msg-1",
        output_index=0,
        content_index=0,
        delta=delta,
        logprobs=[],
        sequence_number=2 + i,
    )
    for i, delta in enumerate(DELTAS)
]
"""The same 50 delta events for every answer (nothing downstream changes them)."""


def describe() -> dict[str, Any]:
    return {
        "version": f"openai-agents {version('openai-agents')}, openai {version('openai')}",
        "persistence": "SQLiteSession on a file (sqlite3 in worker threads), WAL, synchronous at"
        " SQLite's default (FULL): the input items, then the run's new items",
        "streaming": "Runner.run_streamed(...).stream_events(): raw response events",
        "model": "a Model subclass yielding Responses stream events (tracing disabled)",
    }


def response(output: list[TResponseOutputItem], *, status: str = "completed") -> Response:
    return Response.model_validate(
        {
            "id": "resp-1",
            "created_at": 0,
            "model": "scripted",
            "object": "response",
            "output": output,
            "tool_choice": "auto",
            "tools": [],
            "parallel_tool_calls": False,
            "status": status,
        }
    )


def script(last_is_tool_output: bool) -> list[TResponseStreamEvent]:
    """The events of one answer: the tool call, or (after the tool's output) the text."""
    item: TResponseOutputItem
    events: list[TResponseStreamEvent] = [
        ResponseCreatedEvent(
            type="response.created", response=response([], status="in_progress"), sequence_number=0
        )
    ]
    if not last_is_tool_output:
        item = ResponseFunctionToolCall(
            type="function_call",
            id="fc-1",
            call_id="call-1",
            name=TOOL_NAME,
            arguments=TOOL_ARGUMENTS_JSON,
            status="completed",
        )
        middle: list[TResponseStreamEvent] = [
            ResponseFunctionCallArgumentsDeltaEvent(
                type="response.function_call_arguments.delta",
                item_id="fc-1",
                output_index=0,
                delta=TOOL_ARGUMENTS_JSON,
                sequence_number=2,
            )
        ]
    else:
        text = ResponseOutputText(type="output_text", text=ANSWER, annotations=[], logprobs=[])
        item = ResponseOutputMessage(
            type="message", id="msg-1", role="assistant", status="completed", content=[text]
        )
        middle = list(TEXT_DELTAS)
    events.append(
        ResponseOutputItemAddedEvent(
            type="response.output_item.added", item=item, output_index=0, sequence_number=1
        )
    )
    events.extend(middle)
    done = 2 + len(middle)
    events.append(
        ResponseOutputItemDoneEvent(
            type="response.output_item.done", item=item, output_index=0, sequence_number=done
        )
    )
    events.append(
        ResponseCompletedEvent(
            type="response.completed", response=response([item]), sequence_number=done + 1
        )
    )
    return events


def tool_output_last(input: str | list[TResponseInputItem]) -> bool:
    if isinstance(input, str) or not input:
        return False
    last: Any = input[-1]
    return isinstance(last, dict) and last.get("type") == "function_call_output"


class ScriptedResponsesModel(Model):
    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        raise NotImplementedError("the benchmark streams")

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        for event in script(tool_output_last(input)):
            yield event


@contextlib.asynccontextmanager
async def open_system(directory: Path) -> AsyncIterator[Turn]:
    set_tracing_disabled(True)
    database = directory / "agents.db"
    agent: Agent[None] = Agent(
        name="calculator", tools=[function_tool(add)], model=ScriptedResponsesModel()
    )
    run_config = RunConfig(tracing_disabled=True)
    sessions: dict[str, SQLiteSession] = {}

    async def turn(session_id: str) -> Outcome:
        session = sessions.get(session_id)
        if session is None:
            for old in sessions.values():
                old.close()
            sessions.clear()
            session = sessions[session_id] = SQLiteSession(session_id, database)
        outcome = Outcome()
        result = Runner.run_streamed(agent, USER_TEXT, session=session, run_config=run_config)
        async for event in result.stream_events():
            if isinstance(event, RawResponsesStreamEvent) and isinstance(
                event.data, ResponseTextDeltaEvent
            ):
                outcome.deltas.append(event.data.delta)
        outcome.answer = str(result.final_output)
        outputs = [item for item in result.new_items if isinstance(item, ToolCallOutputItem)]
        outcome.tool_result = str(outputs[-1].output) if outputs else ""
        return outcome

    try:
        yield turn
    finally:
        for session in sessions.values():
            session.close()
