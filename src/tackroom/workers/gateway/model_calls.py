"""``GET /v1/sessions/{sid}/model-calls``: each model call on a session's active path — what it
was sent, its answer, its tokens and cost, and the context decision the orchestrator announced
for it (``context_assembled``).

A call recorded since the orchestrator keeps what it sent (``message_complete.sent``) lists it
exactly (``exact: true``): the system prompt and the tools as the provider got them, and the
messages in order — session entries named by id, anything else (a compaction summary, a clipped
result, a message a hook rewrote) as it was sent (:mod:`.sent_prompts`). An older call is rebuilt
from the session (``exact: false``): the entries before the answer from the latest compaction
on (the compaction standing for what it replaced, pinned entries carried over it), in path
order, without the system prompt and tools."""

from __future__ import annotations

import contextlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from tackroom.contracts import sessions as tree
from tackroom.contracts.events import ContextAssembledData
from tackroom.contracts.gateway import RUN_ID_PATTERN
from tackroom.contracts.messages import AssistantMessage, Usage
from tackroom.contracts.modelprompts import SentPrompt
from tackroom.contracts.provider import ToolSpec
from tackroom.kit.context import compaction_details
from tackroom.workers.gateway.access import may_on_session
from tackroom.workers.gateway.history import StoredEvent, stored_events
from tackroom.workers.gateway.inputs import query
from tackroom.workers.gateway.operations import Operation, Query
from tackroom.workers.gateway.sent_prompts import Blobs, PromptMessage, fetch_blobs, rebuild
from tackroom.workers.gateway.service import gateway_of, reply

__all__ = ["OPERATIONS", "ModelCall", "ModelCalls", "PromptMessage"]


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
    exact: bool = Field(
        default=False,
        description="true: the request as sent, recorded at call time; false: rebuilt from the"
        " session (a call recorded before that), without system prompt and tools",
    )
    system_prompt: str | None = Field(default=None, description="as sent (exact calls only)")
    tools: list[ToolSpec] | None = Field(
        default=None, description="the tools offered, as sent (exact calls only)"
    )
    tool_calling: Literal["native", "text"] | None = Field(
        default=None, description="text: the tools were written in the system prompt"
    )
    prompt: list[PromptMessage] = Field(description="the messages sent, in order")
    completion: AssistantMessage
    context: ContextAssembledData | None = Field(
        default=None, description="the context budget of the call, when one was known"
    )


class ModelCalls(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    schema_version: int = 2
    """Version 2: ``exact``, ``system_prompt``, ``tools``, ``tool_calling``; a prompt message's
    ``entry_id`` may be null (a message sent that is no session entry)."""
    session_id: str
    calls: list[ModelCall] = Field(description="oldest first")


def _prompt(path: list[tree.PathMessage], end: int, pinned: set[str]) -> list[PromptMessage]:
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
    return [
        PromptMessage(entry_id=entry.entry_id, type=entry.type, message=entry.message)
        for entry in [*carried, *path[start:end]]
    ]


class _Answers:
    """What the stored events say of each answer: its run, its context, what it was sent."""

    def __init__(self, events: list[StoredEvent]) -> None:
        self.runs: dict[str, str] = {}
        self.contexts: dict[str, ContextAssembledData] = {}
        self.sent: dict[str, SentPrompt] = {}
        for event in events:
            message_id = event.data.get("message_id")
            if not isinstance(message_id, str) or event.run_id is None:
                continue
            if event.type == "message_complete":
                self.runs[message_id] = event.run_id
                self._read_sent(message_id, event.data.get("sent"))
            elif event.type == "context_assembled":
                self.contexts[message_id] = ContextAssembledData.model_validate(event.data)

    def _read_sent(self, message_id: str, sent: object) -> None:
        if sent is None:
            return
        with contextlib.suppress(ValidationError):  # unreadable: the call is rebuilt
            self.sent[message_id] = SentPrompt.model_validate(sent)


def _call(
    path: list[tree.PathMessage],
    end: int,
    message: AssistantMessage,
    *,
    answers: _Answers,
    pinned: set[str],
    index: dict[str, int],
    blobs: Blobs,
) -> ModelCall:
    entry = path[end]
    sent = answers.sent.get(entry.entry_id)
    rebuilt = None
    if sent is not None:
        rebuilt = rebuild(sent, path=path, end=end, index=index, blobs=blobs)
    call = ModelCall(
        entry_id=entry.entry_id,
        run_id=answers.runs.get(entry.entry_id),
        provider=message.provider,
        model=message.model,
        usage=message.usage,
        prompt=_prompt(path, end, pinned) if rebuilt is None else rebuilt.messages,
        completion=message,
        context=answers.contexts.get(entry.entry_id),
    )
    if rebuilt is not None and sent is not None:
        call.exact = True
        call.system_prompt = rebuilt.system_prompt
        call.tools = rebuilt.tools
        call.tool_calling = sent.tool_calling
    return call


async def list_model_calls(request: Request) -> Response:
    gateway = gateway_of(request)
    _, session_id = await may_on_session(request, "read")
    params = query(request, ModelCallsQuery)
    found = await gateway.call(tree.MESSAGES, tree.MessagesRequest(session_id=session_id))
    answers = _Answers(await stored_events(gateway, session_id))
    path = found.messages
    answered = [
        (end, entry.message)
        for end, entry in enumerate(path)
        if isinstance(entry.message, AssistantMessage)
        and (params.run_id is None or answers.runs.get(entry.entry_id) == params.run_id)
    ][-params.limit :]
    sent = answers.sent
    prompts = [sent[path[end].entry_id] for end, _ in answered if path[end].entry_id in sent]
    blobs = await fetch_blobs(gateway, session_id, prompts) if prompts else {}
    index = {entry.entry_id: position for position, entry in enumerate(path)}
    pinned = set(found.pinned)
    calls = [
        _call(path, end, message, answers=answers, pinned=pinned, index=index, blobs=blobs)
        for end, message in answered
    ]
    return reply(ModelCalls(session_id=session_id, calls=calls))


OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/sessions/{sid}/model-calls",
        endpoint=list_model_calls,
        operation_id="listModelCalls",
        summary="Each model call of a session: what it was sent, the answer, tokens and cost",
        tag="sessions",
        query=ModelCallsQuery,
        response=ModelCalls,
    ),
)
