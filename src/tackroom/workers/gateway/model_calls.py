"""``GET /v1/sessions/{sid}/model-calls``: each model call on a session's active path — the
messages it was sent, its answer, its tokens and cost, and the context decision the orchestrator
announced for it (``context_assembled``).

The prompt is read from the session as the model read it: the entries before the answer from the
latest compaction on (the compaction standing for what it replaced, pinned entries carried over
it), in path order. The system prompt and tools are the run's, not the session's: not listed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts import sessions as tree
from tackroom.contracts.events import ContextAssembledData
from tackroom.contracts.gateway import RUN_ID_PATTERN
from tackroom.contracts.messages import AssistantMessage, Usage
from tackroom.kit.context import compaction_details
from tackroom.workers.gateway.access import may_on_session
from tackroom.workers.gateway.history import stored_events
from tackroom.workers.gateway.inputs import query
from tackroom.workers.gateway.operations import Operation, Query
from tackroom.workers.gateway.service import gateway_of, reply

__all__ = ["OPERATIONS", "ModelCall", "ModelCalls"]


class ModelCallsQuery(Query):
    run_id: str | None = Field(default=None, pattern=RUN_ID_PATTERN, description="only this run's")
    limit: int = Field(default=50, ge=1, le=500, description="the latest calls, at most")


class ModelCall(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    entry_id: str = Field(description="the answer's entry")
    run_id: str | None = None
    provider: str
    model: str
    usage: Usage = Field(description="input and output tokens and cost, as the provider counted")
    prompt: list[tree.PathMessage] = Field(description="the messages sent, in path order")
    completion: AssistantMessage
    context: ContextAssembledData | None = Field(
        default=None, description="the context budget of the call, when one was known"
    )


class ModelCalls(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    schema_version: int = 1
    session_id: str
    calls: list[ModelCall] = Field(description="oldest first")


def _prompt(path: list[tree.PathMessage], end: int, pinned: set[str]) -> list[tree.PathMessage]:
    """The entries before ``end`` a model call read: from the latest compaction's first kept
    entry on, and the pinned entries before it."""
    start = 0
    for index in range(end - 1, -1, -1):
        details = compaction_details(path[index].message)
        if details is not None:
            kept = next(
                (i for i in range(index) if path[i].entry_id == details.first_kept_entry_id),
                index,
            )
            start = min(kept, index)
            break
    carried = [entry for entry in path[:start] if entry.entry_id in pinned]
    return [*carried, *path[start:end]]


async def list_model_calls(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "read")
    params = query(request, ModelCallsQuery)
    found = await gateway.call(tree.MESSAGES, tree.MessagesRequest(session_id=session_id))
    runs: dict[str, str] = {}
    contexts: dict[str, ContextAssembledData] = {}
    for event in await stored_events(gateway, session_id):
        message_id = event.data.get("message_id")
        if not isinstance(message_id, str) or event.run_id is None:
            continue
        if event.type == "message_complete":
            runs[message_id] = event.run_id
        elif event.type == "context_assembled":
            contexts[message_id] = ContextAssembledData.model_validate(event.data)
    path = found.messages
    pinned = set(found.pinned)
    calls = [
        ModelCall(
            entry_id=entry.entry_id,
            run_id=runs.get(entry.entry_id),
            provider=entry.message.provider,
            model=entry.message.model,
            usage=entry.message.usage,
            prompt=_prompt(path, index, pinned),
            completion=entry.message,
            context=contexts.get(entry.entry_id),
        )
        for index, entry in enumerate(path)
        if isinstance(entry.message, AssistantMessage)
        and (params.run_id is None or runs.get(entry.entry_id) == params.run_id)
    ]
    return reply(ModelCalls(session_id=session_id, calls=calls[-params.limit :]))


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/sessions/{sid}/model-calls",
        endpoint=list_model_calls,
        operation_id="listModelCalls",
        summary="Each model call of a session: the messages sent, the answer, tokens and cost",
        tag="sessions",
        query=ModelCallsQuery,
        response=ModelCalls,
    ),
)
