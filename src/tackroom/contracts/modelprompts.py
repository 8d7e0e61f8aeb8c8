"""What a model call was sent, exactly, recorded at call time by content address.

Each answer's ``message_complete`` carries a :class:`SentPrompt`: digests of the system prompt
and the tool set as the provider got them (after ``before_model_call`` hooks, structured-output
instructions and tools written in text), and the messages in order — runs of session entries
sent as stored (``first`` … ``last`` on the path before the answer), and the digest of each
message sent otherwise (a compaction summary, a clipped result, a rule as user text, a message
a hook rewrote). Each distinct system prompt, tool set and such message is stored once per
session in scope :data:`PROMPTS_SCOPE` under ``<session_id>/<sha256>``, so a call's record
stays small however long the session grows, and a reader rebuilds the request exactly.

A provider with ``tool_calling: text`` was sent the messages rendered by
:func:`tackroom.kit.texttools.as_text_history` (a deterministic function of those recorded) and
the tools in its system prompt (recorded as sent); the corrections a turn made after an
unreadable call are the ``appended`` messages.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.bus import Scope
from tackroom.contracts.messages import AgentMessage
from tackroom.contracts.provider import ToolSpec

__all__ = [
    "PROMPTS_SCOPE",
    "SCHEMA_VERSION",
    "MessageBlob",
    "PromptBlob",
    "SentBlob",
    "SentEntries",
    "SentPrompt",
    "SentRef",
    "SystemBlob",
    "ToolsBlob",
    "blob_key",
    "digest_of",
]

SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)


class SentEntries(_Model):
    """Consecutive entries of the path, sent as the session stores them."""

    kind: Literal["entries"] = "entries"
    first: str
    last: str
    count: int = Field(ge=1, description="entries from first to last, both included")


class SentBlob(_Model):
    """One message sent in a form the session does not store (stored by its digest)."""

    kind: Literal["blob"] = "blob"
    sha256: str


SentRef = Annotated[SentEntries | SentBlob, Field(discriminator="kind")]


class SentPrompt(_Model):
    """A model call's request, by reference (the provider's own parameters inline)."""

    schema_version: int = SCHEMA_VERSION
    system_sha256: str = Field(description="the system prompt as sent (a SystemBlob)")
    tools_sha256: str | None = Field(
        default=None, description="the tools offered (a ToolsBlob); None: no tools"
    )
    tool_calling: Literal["native", "text"] = "native"
    messages: list[SentRef] = Field(default_factory=list)
    appended: list[SentRef] = Field(
        default_factory=list,
        exclude_if=lambda value: not value,
        description="tools in text: the failed answers and corrections sent after the history",
    )
    max_output_tokens: int | None = Field(default=None, exclude_if=lambda value: value is None)
    temperature: float | None = Field(default=None, exclude_if=lambda value: value is None)


class SystemBlob(_Model):
    schema_version: int = SCHEMA_VERSION
    kind: Literal["system"] = "system"
    text: str


class ToolsBlob(_Model):
    schema_version: int = SCHEMA_VERSION
    kind: Literal["tools"] = "tools"
    tools: list[ToolSpec]


class MessageBlob(_Model):
    schema_version: int = SCHEMA_VERSION
    kind: Literal["message"] = "message"
    message: AgentMessage


PromptBlob = Annotated[SystemBlob | ToolsBlob | MessageBlob, Field(discriminator="kind")]

PROMPTS_SCOPE: Scope[PromptBlob] = Scope("model-prompts", PromptBlob)
"""Key ``<session_id>/<sha256>``: each distinct part of the session's model calls, once."""


def blob_key(session_id: str, sha256: str) -> str:
    return f"{session_id}/{sha256}"


def digest_of(kind: str, value: Any) -> str:
    """The sha256 of a part as JSON (``value`` already JSON: keys sorted, no spaces)."""
    canonical = json.dumps([kind, value], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
