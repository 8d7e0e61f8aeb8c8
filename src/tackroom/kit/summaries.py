"""What a model or tool span says happened: an input and an output summary, short and scrubbed.

Every model-call span (``chat <model>``) and tool span (``execute_tool <name>``) carries
:data:`INPUT` and :data:`OUTPUT` (:mod:`tackroom.kit.genai` sets them):

- a model call's input: ``<n> messages, <t> tools;`` then the request's last turn — the
  messages after the last assistant message, each as ``user: …`` or ``result <function>: …``;
  its output: the answer's text, then ``→ tool(arguments)`` per call, or ``error (<kind>): …``;
- a tool call's input: its arguments as compact JSON; its output: the result's text
  (``error: …`` when it is one).

Each is scrubbed before it is cut to ``max_chars`` (``tracing.summaries``): the values of known
secrets (the providers' key variables and ``secret_env``) are masked wherever they appear, then
the redactor's patterns run (:class:`tackroom.kit.redaction.Redactor`, the ``redactor`` worker's
own implementation) — so no secret a tool was handed or a model wrote reaches a span, and one cut
in half by the limit is still removed whole. The status message of a failed call and a retry's
message are scrubbed the same way (also with summaries off). Nothing is computed with tracing
off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from tackroom.contracts.credentials import DEFAULT_ENV_VARS
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    FunctionResultMessage,
    ImageBlock,
    TextBlock,
    UserMessage,
)
from tackroom.contracts.provider import ProviderRequest
from tackroom.contracts.redaction import DEFAULT_PATTERNS, DEFAULT_REPLACEMENT, RedactPattern
from tackroom.engine.tracing import SummaryConfig, current_summaries
from tackroom.kit.redaction import Redactor, mask_values

__all__ = ["INPUT", "OUTPUT", "Summarizer", "summarizer"]

INPUT = "tackroom.input.summary"
OUTPUT = "tackroom.output.summary"

_SLACK = 1024
"""Characters read past ``max_chars`` before scrubbing: a secret that straddles the limit is
found whole (and then cut away with the rest)."""
_ELLIPSIS = "…"


class Summarizer:
    """Summaries for one :class:`SummaryConfig`: its patterns compiled, its secrets read once."""

    def __init__(self, config: SummaryConfig, *, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        extra = [RedactPattern(name=name, regex=regex) for name, regex in config.patterns]
        self.enabled = config.enabled
        """Summaries are written (off: the scrubbing of status messages still holds)."""
        self.max_chars = config.max_chars
        self._redactor = Redactor([*DEFAULT_PATTERNS, *extra], replacement=DEFAULT_REPLACEMENT)
        names = dict.fromkeys([*DEFAULT_ENV_VARS.values(), *config.secret_env])
        self._secrets = tuple(value for name in names if (value := env.get(name, "")))
        self._longest = max(map(len, self._secrets), default=0)

    def text(self, text: str, *, limit: int | None = None) -> str:
        """``text`` scrubbed, then cut to ``limit`` (default ``max_chars``; an ellipsis marks a
        cut)."""
        most = self.max_chars if limit is None else limit
        window = most + _SLACK + self._longest
        clean = self._redactor.text(mask_values(text[:window], self._secrets))
        if len(clean) <= most:
            return clean
        return clean[: max(0, most - len(_ELLIPSIS))] + _ELLIPSIS

    def model_input(self, request: ProviderRequest | Any) -> str:
        parsed = _request(request)
        if parsed is None:
            return ""
        messages = parsed.messages
        tail: list[str] = []
        for message in reversed(messages):
            if isinstance(message, AssistantMessage) and tail:
                break
            tail.append(_line(message))
        head = f"{_count(len(messages), 'message')}, {_count(len(parsed.tools), 'tool')}; "
        return self.text(head + " | ".join(reversed(tail)))

    def model_output(self, message: AssistantMessage) -> str:
        if message.stop_reason == "error":
            kind = message.error_kind or "permanent"
            return self.text(f"error ({kind}): {message.error_message or ''}")
        text = _content(message.content)
        parts = [text] if text else []
        parts.extend(
            f"→ {call.tool_name}({_json(call.arguments)})" for call in message.function_calls()
        )
        return self.text(" ".join(parts))

    def failure(self, kind: str, message: str) -> str:
        return self.text(f"error ({kind}): {message}")

    def tool_input(self, arguments: Mapping[str, Any]) -> str:
        return self.text(_json(arguments))

    def tool_output(self, result: FunctionResultMessage) -> str:
        text = _content(result.content)
        return self.text(f"error: {text}" if result.is_error else text)


def summarizer() -> Summarizer | None:
    """The summarizer of the invocation in force; ``None`` with tracing off."""
    config = current_summaries()
    return None if config is None else _built(config)


@lru_cache(maxsize=8)
def _built(config: SummaryConfig) -> Summarizer:
    return Summarizer(config)


def _request(request: Any) -> ProviderRequest | None:
    if isinstance(request, ProviderRequest):
        return request
    try:
        return ProviderRequest.model_validate(request)
    except ValidationError:
        return None


def _line(message: AgentMessage) -> str:
    if isinstance(message, FunctionResultMessage):
        mark = " (error)" if message.is_error else ""
        return f"result {message.function_id}{mark}: {_content(message.content)}"
    if isinstance(message, (UserMessage, AssistantMessage)):
        return f"{message.role}: {_content(message.content)}"
    return f"{message.custom_type}: {_content(message.content)}"


def _content(blocks: Iterable[Any]) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ImageBlock):
            parts.append("[image]")
    return " ".join(part for part in parts if part)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)
