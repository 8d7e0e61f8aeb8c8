"""A model call's request as it was sent, rebuilt from its record (``message_complete.sent``):
the session's entries it names, and the parts stored by digest in ``model-prompts``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tackroom.contracts import sessions as tree
from tackroom.contracts.engine import STATE_GET, StateGetRequest
from tackroom.contracts.messages import AgentMessage
from tackroom.contracts.modelprompts import (
    PROMPTS_SCOPE,
    MessageBlob,
    PromptBlob,
    SentBlob,
    SentPrompt,
    SentRef,
    SystemBlob,
    ToolsBlob,
    blob_key,
)
from tackroom.contracts.provider import ToolSpec
from tackroom.kit.texttools import as_text_history
from tackroom.workers.gateway.service import Gateway

__all__ = ["Blobs", "PromptMessage", "Rebuilt", "digests_of", "fetch_blobs", "rebuild"]


class PromptMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    entry_id: str | None = Field(
        default=None, description="the session entry, when it was sent as the session stores it"
    )
    type: tree.EntryType | None = None
    message: AgentMessage


@dataclass(frozen=True, slots=True)
class Rebuilt:
    system_prompt: str
    tools: list[ToolSpec]
    messages: list[PromptMessage]


Blobs = dict[str, PromptBlob]


def digests_of(sent: SentPrompt) -> set[str]:
    digests = {sent.system_sha256}
    if sent.tools_sha256 is not None:
        digests.add(sent.tools_sha256)
    for ref in (*sent.messages, *sent.appended):
        if isinstance(ref, SentBlob):
            digests.add(ref.sha256)
    return digests


async def fetch_blobs(gateway: Gateway, session_id: str, prompts: Iterable[SentPrompt]) -> Blobs:
    """The parts the records name (a part missing or unreadable is left out)."""
    wanted = sorted({digest for sent in prompts for digest in digests_of(sent)})

    async def one(digest: str) -> PromptBlob | None:
        key = blob_key(session_id, digest)
        found = await gateway.call(STATE_GET, StateGetRequest(scope=PROMPTS_SCOPE.name, key=key))
        if found is None:
            return None
        try:
            return PROMPTS_SCOPE.parse(found.value)
        except ValidationError:
            return None

    got = await asyncio.gather(*(one(digest) for digest in wanted))
    return {digest: blob for digest, blob in zip(wanted, got, strict=True) if blob is not None}


def rebuild(
    sent: SentPrompt, *, path: list[tree.PathMessage], end: int, index: dict[str, int], blobs: Blobs
) -> Rebuilt | None:
    """The request of the call answered by ``path[end]``; ``None`` when its record cannot be
    read back (a part gone, entries no longer on this path)."""
    system = blobs.get(sent.system_sha256)
    if not isinstance(system, SystemBlob):
        return None
    tools: list[ToolSpec] = []
    if sent.tools_sha256 is not None:
        offered = blobs.get(sent.tools_sha256)
        if not isinstance(offered, ToolsBlob):
            return None
        tools = offered.tools
    messages = _messages(sent.messages, path=path, end=end, index=index, blobs=blobs)
    appended = _messages(sent.appended, path=path, end=end, index=index, blobs=blobs)
    if messages is None or appended is None:
        return None
    if sent.tool_calling == "text":
        messages = _as_text(messages)
    return Rebuilt(system_prompt=system.text, tools=tools, messages=[*messages, *appended])


def _messages(
    refs: list[SentRef],
    *,
    path: list[tree.PathMessage],
    end: int,
    index: dict[str, int],
    blobs: Blobs,
) -> list[PromptMessage] | None:
    out: list[PromptMessage] = []
    for ref in refs:
        if isinstance(ref, SentBlob):
            blob = blobs.get(ref.sha256)
            if not isinstance(blob, MessageBlob):
                return None
            out.append(PromptMessage(message=blob.message))
            continue
        first, last = index.get(ref.first), index.get(ref.last)
        if first is None or last is None or last >= end or last - first + 1 != ref.count:
            return None
        out.extend(
            PromptMessage(entry_id=entry.entry_id, type=entry.type, message=entry.message)
            for entry in path[first : last + 1]
        )
    return out


def _as_text(messages: list[PromptMessage]) -> list[PromptMessage]:
    """The messages as a provider without native tools read them: what passed unchanged keeps
    its entry."""
    kept = {id(item.message): item for item in messages}
    rendered = as_text_history([item.message for item in messages])
    return [kept.get(id(message)) or PromptMessage(message=message) for message in rendered]
