"""What a fake LLM server answers: an :class:`Answer` (the model's message) inside a
:class:`Reply` (how the HTTP exchange goes: a stream, an error status, a broken stream).

Both are wire-neutral; each fake server encodes them in its own wire format.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Answer",
    "Cut",
    "FakeToolCall",
    "FakeUsage",
    "LoggedRequest",
    "Reply",
    "StopKind",
    "pieces",
]

StopKind = Literal["end", "length", "tool_calls", "content_filter", "refusal"]
Cut = Literal["disconnect", "truncate", "malformed", "error_event"]
"""How a stream breaks after ``cut_after`` events: ``disconnect`` closes the socket in the
middle of the chunked body; ``truncate`` ends the body cleanly without the end of the message;
``malformed`` sends an event whose JSON does not parse; ``error_event`` sends the wire's
in-stream error event (``error`` / ``error_type`` of the reply)."""


def pieces(text: str, size: int) -> list[str]:
    """``text`` cut into pieces of ``size`` characters (none for empty text)."""
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    """A tool call in an answer; ``arguments`` as a mapping (JSON-encoded) or raw JSON text."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class FakeUsage:
    """Token counts; ``input_tokens`` excludes cache reads (on the OpenAI wire the prompt
    tokens are ``input_tokens + cache_read_tokens`` with ``cached_tokens = cache_read``)."""

    input_tokens: int = 12
    output_tokens: int = 7
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """The model's message: thinking, text, tool calls, usage, how it stopped."""

    text: str = ""
    thinking: str = ""
    signature: str = "sig-fake-0001"
    """The thinking block's signature (Anthropic wire)."""
    redacted_thinking: str | None = None
    """Opaque data of a ``redacted_thinking`` block before the others (Anthropic wire)."""
    tool_calls: Sequence[FakeToolCall] = ()
    usage: FakeUsage = FakeUsage()
    stop: StopKind | None = None
    """Default: ``tool_calls`` when there are calls, else ``end``."""
    chunk: int = 8
    """Characters per delta (text, thinking, argument JSON)."""
    reasoning_field: str = "reasoning_content"
    """The delta field carrying thinking on the OpenAI wire (``reasoning`` on some servers)."""

    @property
    def stop_kind(self) -> StopKind:
        if self.stop is not None:
            return self.stop
        return "tool_calls" if self.tool_calls else "end"

    def call_id(self, index: int, prefix: str) -> str:
        call = self.tool_calls[index]
        return call.id or f"{prefix}{index + 1}"


EventSource = Callable[["LoggedRequest"], AsyncIterator[bytes]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One HTTP exchange. Build with the class methods; fields combine freely."""

    answer: Answer | None = None
    status: int = 200
    error: str = ""
    """The error message (of an error status or an ``error_event``)."""
    error_type: str = ""
    """The wire's error type or code (default: the usual one for the status)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    """Events sent before the stream breaks as ``cut`` says (``None``: it does not break)."""
    cut: Cut = "disconnect"
    interval: float = 0.0
    """Seconds between events (keep 0 in tests: they should not depend on timing)."""
    events: EventSource | None = None
    """Raw SSE events to send instead of encoding ``answer`` (each a complete event)."""

    # -- answers -----------------------------------------------------------------------------
    @classmethod
    def say(cls, text: str, **answer: Any) -> Reply:
        """A streamed text answer (``answer``: other :class:`Answer` fields)."""
        return cls(answer=Answer(text=text, **answer))

    @classmethod
    def call(
        cls, name: str, arguments: Mapping[str, Any] | str | None = None, **answer: Any
    ) -> Reply:
        """A streamed answer making one tool call."""
        call = FakeToolCall(name=name, arguments=arguments if arguments is not None else {})
        return cls(answer=Answer(tool_calls=(call,), **answer))

    # -- failures ----------------------------------------------------------------------------
    @classmethod
    def status_error(
        cls,
        status: int,
        message: str = "",
        *,
        error_type: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        return cls(
            status=status,
            error=message or f"fake error {status}",
            error_type=error_type,
            headers=dict(headers or {}),
        )

    @classmethod
    def rate_limited(
        cls, message: str = "rate limited: slow down", *, retry_after: float | str | None = 1
    ) -> Reply:
        headers = {} if retry_after is None else {"retry-after": str(retry_after)}
        return cls.status_error(429, message, headers=headers)

    @classmethod
    def server_error(cls, message: str = "the server had an error", *, status: int = 500) -> Reply:
        return cls.status_error(status, message)

    @classmethod
    def unauthorized(cls, message: str = "invalid api key") -> Reply:
        return cls.status_error(401, message)

    @classmethod
    def context_overflow(cls) -> Reply:
        """A 400 naming the context length, as each wire words it."""
        return cls(status=400, error="", error_type="context_length_exceeded")

    @classmethod
    def disconnect(cls, answer: Answer, *, after: int) -> Reply:
        """Stream ``after`` events of ``answer``, then close the socket mid-body."""
        return cls(answer=answer, cut_after=after, cut="disconnect")

    @classmethod
    def truncated(cls, answer: Answer, *, after: int) -> Reply:
        """Stream ``after`` events, then end the body cleanly without finishing the message."""
        return cls(answer=answer, cut_after=after, cut="truncate")

    @classmethod
    def malformed(cls, answer: Answer, *, after: int) -> Reply:
        """Stream ``after`` events, then an event whose JSON does not parse."""
        return cls(answer=answer, cut_after=after, cut="malformed")

    @classmethod
    def stream_error(
        cls,
        answer: Answer,
        *,
        after: int,
        message: str = "Overloaded",
        error_type: str = "overloaded_error",
    ) -> Reply:
        """Stream ``after`` events, then the wire's in-stream error event."""
        return cls(
            answer=answer, cut_after=after, cut="error_event", error=message, error_type=error_type
        )


@dataclass(slots=True)
class LoggedRequest:
    """One request the server received, and what it answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    """The HTTP status answered (200 for a stream, even one that broke later)."""
    reply: Reply | None = field(default=None, repr=False)

    @property
    def api_key(self) -> str | None:
        """The key sent as ``x-api-key`` or ``Authorization: Bearer``."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        auth = self.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream")) if isinstance(self.body, dict) else False
