"""The provider contract: what ``provider::<name>::stream`` and ``::complete`` take and send.

A provider worker registers ``provider::<name>::stream``: it receives a :class:`ProviderRequest`
whose ``writer`` is a channel reference, sends :data:`ProviderEvent` frames on that channel (JSON,
:func:`frame_json`), ends with exactly one terminal frame — ``done`` (the finished
:class:`AssistantMessage`) or ``error`` — and then closes the channel. A reader takes each frame
back with :func:`read_frame`: a frame of a type it does not know (a newer provider's) is skipped,
a malformed terminal frame raises :class:`MalformedFrame`. The function's own result
is ``{"schema_version": 1, "ok": true}`` once the stream is finished. ``provider::<name>::complete``
takes the same request without ``writer`` and returns the finished message as JSON.

Tools are named for the model by :func:`tool_name_for` (``fs::read`` → ``fs__read``); providers
see tool names only, the orchestrator maps them back to function ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from tackroom.contracts.bus import Function
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    ErrorKind,
    StopReason,
    Usage,
)

__all__ = [
    "SCHEMA_VERSION",
    "CheckResult",
    "DoneEvent",
    "ErrorEvent",
    "FunctionCallDelta",
    "MalformedFrame",
    "OutputFormat",
    "ProviderCheckRequest",
    "ProviderEvent",
    "ProviderProfile",
    "ProviderProfileRequest",
    "ProviderRequest",
    "StartEvent",
    "StopEvent",
    "StreamResult",
    "TextDelta",
    "ThinkingDelta",
    "ToolCalling",
    "ToolNames",
    "ToolSpec",
    "UsageEvent",
    "check_function",
    "complete_function",
    "frame_json",
    "profile_function",
    "provider_event_adapter",
    "read_frame",
    "request_field",
    "stream_function",
    "tool_name_for",
]


SCHEMA_VERSION = 1
"""The provider protocol's own version (requests, frames, results); the messages a request or a
``done`` frame carries have theirs (:data:`tackroom.contracts.messages.SCHEMA_VERSION`)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


@cache
def stream_function(provider: str) -> Function[ProviderRequest, StreamResult]:
    """``provider::<name>::stream``: frames on the request's ``writer``, then a
    :class:`StreamResult`.

    A bus hop in traces: the provider's GenAI span ``chat <model>`` (``tackroom.kit.genai``) is
    the call's span. A provider served without that span registers it with ``hop=False``."""
    return Function(
        f"provider::{provider}::stream",
        ProviderRequest,
        StreamResult,
        description=f"Stream a {provider} model's answer as provider frames on the writer.",
        hop=True,
    )


@cache
def complete_function(provider: str) -> Function[ProviderRequest, AssistantMessage]:
    """``provider::<name>::complete``: the finished message (no ``writer``); a hop in traces, as
    :func:`stream_function` is."""
    return Function(
        f"provider::{provider}::complete",
        ProviderRequest,
        AssistantMessage,
        description=f"Ask a {provider} model and return the finished AssistantMessage.",
        hop=True,
    )


@cache
def check_function(provider: str) -> Function[ProviderCheckRequest, CheckResult]:
    """``provider::<name>::check``: is the key there, is the local server reachable?

    ``check`` tells whether a provider can be called — a key is set, a local server answers — so
    a command line can say what is missing before it starts a run. It never returns a key. A
    provider worker without ``check`` is simply assumed ready.
    """
    return Function(
        f"provider::{provider}::check",
        ProviderCheckRequest,
        CheckResult,
        description=f"Is {provider} usable: a key set, its server reachable (never the key).",
    )


@cache
def profile_function(provider: str) -> Function[ProviderProfileRequest, ProviderProfile]:
    """``provider::<name>::profile``: how the orchestrator must talk to this provider (no I/O).

    A provider worker without it is taken to call tools natively.
    """
    return Function(
        f"provider::{provider}::profile",
        ProviderProfileRequest,
        ProviderProfile,
        description=f"How {provider} is called: native tool calling or tools written in text.",
        hop=True,
    )


ToolCalling = Literal["native", "text"]


class ProviderProfileRequest(BaseModel):
    """``profile`` takes nothing (``{}`` or ``null``)."""

    model_config = ConfigDict(extra="ignore")


class ProviderProfile(BaseModel):
    """The answer of ``provider::<name>::profile``."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    provider: str
    tool_calling: ToolCalling = "native"
    """``text``: the model has no native tool calling; the orchestrator describes the tools in
    the system prompt and reads calls written as ``tool_call`` blocks
    (``tackroom.kit.texttools``)."""


class ProviderCheckRequest(BaseModel):
    """``check`` takes nothing (``{}`` or ``null``)."""

    model_config = ConfigDict(extra="ignore")


class StreamResult(BaseModel):
    """The result of ``stream`` once its frames are sent: ``ok``, or why the stream stopped
    early (the reader closed the channel, say)."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    ok: bool
    error: str | None = None


class CheckResult(BaseModel):
    """The answer of ``provider::<name>::check`` (``{}`` or ``null`` as request)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    provider: str
    ready: bool
    problem: str | None = None
    """What is missing, in words a person can act on (``None`` when ready)."""
    key_source: Literal["keys_env", "vault", "env", "none"]
    keys: int
    """How many keys are set (round-robin); never the keys themselves."""
    base_url: str


class ToolSpec(_Model):
    """One function offered to the model as a native tool."""

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


def request_field(payload: Any, name: str) -> Any:
    """A field of a provider request as a handler receives it: the model itself (passed by
    reference in-process) or its JSON."""
    if isinstance(payload, ProviderRequest):
        return getattr(payload, name, None)
    return payload.get(name) if isinstance(payload, dict) else None


class OutputFormat(_Model):
    """The answer constrained to one JSON value valid against ``json_schema``, by the provider's
    native mode (OpenAI ``response_format: {type: json_schema}``, Anthropic
    ``output_config.format``). Sent only for a model the catalog marks ``structured_output``;
    the orchestrator validates the answer either way."""

    name: str = Field(default="output", pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    json_schema: dict[str, Any]
    strict: bool = Field(
        default=False,
        description="OpenAI's strict mode: only for a schema every object of which closes "
        "(additionalProperties false) and requires all its properties",
    )


class ProviderRequest(_Model):
    schema_version: int = SCHEMA_VERSION
    model: str
    system_prompt: str = ""
    messages: list[AgentMessage]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_output_tokens: int | None = None
    temperature: float | None = None
    writer: dict[str, Any] | None = Field(
        default=None, description="ChannelRef.to_json() of the channel to stream frames to"
    )
    session_id: str | None = None
    output_format: OutputFormat | None = Field(
        default=None,
        description="ask the model natively for one JSON value valid against a schema "
        "(a provider that cannot ignores it; the caller validates the answer)",
    )


class _Frame(_Model):
    """A frame on a stream channel; ``schema_version`` is the provider protocol's (a frame
    without one, from a provider older than the field, is version 1)."""

    schema_version: int = SCHEMA_VERSION


class StartEvent(_Frame):
    type: Literal["start"] = "start"
    provider: str = ""
    model: str = ""


class TextDelta(_Frame):
    type: Literal["text_delta"] = "text_delta"
    delta: str


class ThinkingDelta(_Frame):
    type: Literal["thinking_delta"] = "thinking_delta"
    delta: str
    signature: str | None = None


class FunctionCallDelta(_Frame):
    """A piece of the ``index``-th tool call: ``id`` and ``name`` come first, then arguments."""

    type: Literal["function_call_delta"] = "function_call_delta"
    index: int
    id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


class UsageEvent(_Frame):
    type: Literal["usage"] = "usage"
    usage: Usage


class StopEvent(_Frame):
    type: Literal["stop"] = "stop"
    stop_reason: StopReason


class DoneEvent(_Frame):
    """Terminal: the finished message (tool calls carry the *tool names* the model used)."""

    type: Literal["done"] = "done"
    message: AssistantMessage


class ErrorEvent(_Frame):
    """Terminal: the stream failed; ``kind`` decides whether the caller may retry."""

    type: Literal["error"] = "error"
    kind: ErrorKind
    message: str
    retry_after: float | None = None


ProviderEvent = Annotated[
    StartEvent
    | TextDelta
    | ThinkingDelta
    | FunctionCallDelta
    | UsageEvent
    | StopEvent
    | DoneEvent
    | ErrorEvent,
    Field(discriminator="type"),
]

provider_event_adapter: TypeAdapter[ProviderEvent] = TypeAdapter(ProviderEvent)

_TERMINAL = frozenset({"done", "error"})
_FRAME_TYPES: dict[str, type[ProviderEvent]] = {
    model.model_fields["type"].default: model for model in get_args(get_args(ProviderEvent)[0])
}
"""Each frame model by its ``type`` (one lookup, then that model's validator: a frame is read
without trying the union)."""


class MalformedFrame(ValueError):
    """A terminal frame (``done`` or ``error``) that does not parse: the stream has no answer."""

    def __init__(self, frame_type: str, reason: str) -> None:
        super().__init__(f"the provider sent a malformed {frame_type} frame: {reason}")
        self.frame_type = frame_type
        self.reason = reason


def frame_json(frame: ProviderEvent) -> dict[str, Any]:
    """``frame`` as the JSON a stream channel carries."""
    json: dict[str, Any] = frame.__pydantic_serializer__.to_python(frame, mode="json")
    return json


def read_frame(raw: Any) -> ProviderEvent | None:
    """A frame read off a stream channel, typed; ``None`` for one this version cannot use (a
    type it does not know, a malformed delta: deltas only show the answer the terminal frame
    carries whole). Raises :class:`MalformedFrame` for a terminal frame that does not parse."""
    frame_type = raw.get("type") if isinstance(raw, dict) else None
    model = _FRAME_TYPES.get(frame_type) if isinstance(frame_type, str) else None
    if model is None:
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        if frame_type not in _TERMINAL:
            return None
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "frame"
        raise MalformedFrame(str(frame_type), f"{where}: {first['msg']}") from None


_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name_for(function_id: str) -> str:
    """A model-safe tool name for a function id: ``::`` becomes ``__``, other symbols ``_``."""
    name = _INVALID.sub("_", function_id.replace("::", "__"))
    return name[:64] or "tool"


class ToolNames:
    """A two-way map between function ids and the tool names offered for them in one run.

    Names that would collide get a numeric suffix, so the map is always one-to-one.
    """

    def __init__(
        self, function_ids: Iterable[str], *, preferred: Mapping[str, str] | None = None
    ) -> None:
        """``preferred``: the name a function asked for (its ``x-tackroom.name``), by id."""
        self._by_name: dict[str, str] = {}
        self._by_function: dict[str, str] = {}
        for function_id in function_ids:
            if function_id in self._by_function:
                continue
            wanted = (preferred or {}).get(function_id)
            base = tool_name_for(wanted) if wanted else tool_name_for(function_id)
            name, n = base, 1
            while name in self._by_name:
                n += 1
                suffix = f"_{n}"
                name = base[: 64 - len(suffix)] + suffix
            self._by_name[name] = function_id
            self._by_function[function_id] = name

    def name(self, function_id: str) -> str:
        return self._by_function[function_id]

    def function_id(self, name: str) -> str | None:
        return self._by_name.get(name)

    def items(self) -> list[tuple[str, str]]:
        """``(function_id, tool name)`` pairs in offer order."""
        return list(self._by_function.items())
