"""Shared message types: what sessions store, providers read and write, and UIs render.

Every model carries ``schema_version``; messages are discriminated by ``role``, content blocks by
``type``. Timestamps are seconds since the epoch (UTC).

Version 2 (the current one) renamed a ``function_call`` block's ``function_id`` to ``tool_name``;
a message of version 1 (or without ``schema_version``) is upgraded as it is read
(:mod:`tackroom.contracts.versions`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from tackroom.contracts.provenance import Label
from tackroom.contracts.versions import rename, upgrading

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "SCHEMA_VERSION",
    "AgentMessage",
    "AssistantMessage",
    "ContentBlock",
    "CustomMessage",
    "ErrorKind",
    "FunctionCallBlock",
    "FunctionResultBlock",
    "FunctionResultMessage",
    "ImageBlock",
    "ResultBlock",
    "StopReason",
    "TextBlock",
    "ThinkingBlock",
    "Usage",
    "UserMessage",
    "message_adapter",
    "messages_adapter",
    "text_of",
    "unparsed_arguments",
]

SCHEMA_VERSION = 2

StopReason = Literal["end", "length", "function_call", "aborted", "error", "budget_exceeded"]
"""Why an assistant message ended. ``function_call``: it asks for calls to be run."""

ErrorKind = Literal["auth", "rate_limited", "context_overflow", "transient", "permanent"]
"""What kind of failure ended a message with ``stop_reason == "error"``; decides retries."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class TextBlock(_Model):
    type: Literal["text"] = "text"
    text: str


class ImageBlock(_Model):
    type: Literal["image"] = "image"
    mime: str
    data: str = Field(description="base64-encoded bytes")


class ThinkingBlock(_Model):
    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = Field(
        default=None, description="provider signature that must be sent back verbatim"
    )


RAW_ARGUMENTS_KEY = "_raw_arguments"
"""A call whose argument text is not one JSON object keeps the text as ``{RAW_ARGUMENTS_KEY:
text}`` (see :func:`unparsed_arguments`): the turn tells the model its JSON did not parse, and a
provider sends the text back verbatim where its wire can carry it."""


def unparsed_arguments(arguments: Mapping[str, Any]) -> str | None:
    """The model's own argument text when it did not parse as a JSON object, else ``None``."""
    if len(arguments) != 1:
        return None
    raw = arguments.get(RAW_ARGUMENTS_KEY)
    return raw if isinstance(raw, str) else None


class FunctionCallBlock(_Model):
    """A call the model asks for: ``tool_name`` is the name it was offered the tool under
    (``fs__read``), not the function id behind it (``fs::read``). Arguments that were not one
    JSON object are held as ``{RAW_ARGUMENTS_KEY: text}``."""

    type: Literal["function_call"] = "function_call"
    id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


ResultBlock = Annotated[TextBlock | ImageBlock, Field(discriminator="type")]


class FunctionResultBlock(_Model):
    type: Literal["function_result"] = "function_result"
    function_call_id: str
    content: list[ResultBlock] = Field(default_factory=list)
    is_error: bool = False


ContentBlock = Annotated[
    TextBlock | ImageBlock | ThinkingBlock | FunctionCallBlock | FunctionResultBlock,
    Field(discriminator="type"),
]


class Usage(_Model):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


def _now() -> float:
    return time.time()


class _Message(_Model):
    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        """Version 1 → 2: a ``function_call`` block's ``function_id`` becomes ``tool_name``."""
        upgraded = upgrading(data, SCHEMA_VERSION)
        if upgraded is None:
            return data
        content = upgraded.get("content")
        if isinstance(content, list):
            upgraded["content"] = [_upgrade_block(block) for block in content]
        return upgraded


def _upgrade_block(block: Any) -> Any:
    if not isinstance(block, dict) or block.get("type") != "function_call":
        return block
    upgraded = dict(block)
    rename(upgraded, "function_id", "tool_name")
    return upgraded


class UserMessage(_Message):
    schema_version: int = SCHEMA_VERSION
    role: Literal["user"] = "user"
    content: list[ContentBlock]
    timestamp: float = Field(default_factory=_now)
    label: Label | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="where the content came from, when not from its role's usual source",
    )

    @classmethod
    def text(cls, text: str) -> UserMessage:
        return cls(content=[TextBlock(text=text)])


class AssistantMessage(_Message):
    schema_version: int = SCHEMA_VERSION
    role: Literal["assistant"] = "assistant"
    content: list[ContentBlock] = Field(default_factory=list)
    stop_reason: StopReason = "end"
    error_message: str | None = None
    error_kind: ErrorKind | None = None
    usage: Usage = Field(default_factory=Usage)
    provider: str = ""
    model: str = ""
    timestamp: float = Field(default_factory=_now)

    def function_calls(self) -> list[FunctionCallBlock]:
        return [block for block in self.content if isinstance(block, FunctionCallBlock)]


class FunctionResultMessage(_Message):
    schema_version: int = SCHEMA_VERSION
    role: Literal["function_result"] = "function_result"
    function_call_id: str
    function_id: str
    content: list[ResultBlock] = Field(default_factory=list)
    is_error: bool = False
    details: Any = None
    timestamp: float = Field(default_factory=_now)
    label: Label | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="where the content came from, when not from its role's usual source",
    )


class CustomMessage(_Message):
    """An application's own entry (a note, a marker); ``display`` says whether UIs show it."""

    schema_version: int = SCHEMA_VERSION
    role: Literal["custom"] = "custom"
    custom_type: str
    content: list[ContentBlock] = Field(default_factory=list)
    display: bool = True
    details: Any = None
    timestamp: float = Field(default_factory=_now)
    label: Label | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="where the content came from, when not from its role's usual source",
    )


AgentMessage = Annotated[
    UserMessage | AssistantMessage | FunctionResultMessage | CustomMessage,
    Field(discriminator="role"),
]

message_adapter: TypeAdapter[AgentMessage] = TypeAdapter(AgentMessage)
messages_adapter: TypeAdapter[list[AgentMessage]] = TypeAdapter(list[AgentMessage])


def text_of(content: list[Any]) -> str:
    """The text blocks of ``content`` joined (what a terminal shows)."""
    return "".join(block.text for block in content if isinstance(block, TextBlock))
