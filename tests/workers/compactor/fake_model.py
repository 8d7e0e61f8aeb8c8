"""A fake OpenAI model for long sessions: it reads its prompt, counts it like a tokenizer
would (four characters a token, tools included) and answers turns and summary requests."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from tackroom.testing.fake_llm import Answer, FakeUsage, LoggedRequest, Reply

SUMMARY_PROMPT_START = "You compact a conversation"
CHARS_PER_TOKEN = 4


def prompt_tokens(body: dict[str, Any]) -> int:
    """What this fake provider counts for a request: its messages' text and its tools."""
    chars = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(part.get("text", "")) for part in content if isinstance(part, dict))
        for call in message.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"])
    chars += len(json.dumps(body.get("tools", []))) if body.get("tools") else 0
    return math.ceil(chars / CHARS_PER_TOKEN)


def system_text(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") in ("system", "developer"):
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def request_text(body: dict[str, Any]) -> str:
    """Every message's text in a request, joined (to look for a rule in what was sent)."""
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(part.get("text", "") for part in content if isinstance(part, dict))
    return "\n".join(parts)


@dataclass
class LongSessionModel:
    """Answers each turn with ``answer_chars`` of text; answers a summary request with a short
    summary naming how many lines it read. Every prompt's token count is kept."""

    answer_chars: int = 800
    turns: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    summaries: int = 0

    def __call__(self, request: LoggedRequest) -> Reply:
        body = request.body
        tokens = prompt_tokens(body)
        usage = FakeUsage(input_tokens=tokens, output_tokens=50)
        if system_text(body).startswith(SUMMARY_PROMPT_START):
            self.summaries += 1
            lines = request_text(body).count("\n")
            return Reply(
                answer=Answer(text=f"Summary {self.summaries}: {lines} lines.", usage=usage)
            )
        self.turns.append((tokens, body))
        turn = len(self.turns)
        text = (f"Answer {turn}. " + "lorem ipsum dolor sit amet " * 100)[: self.answer_chars]
        return Reply(answer=Answer(text=text, usage=usage, chunk=200))
