"""Fake LLM servers speaking the OpenAI and Anthropic SSE wire formats (for tests, yours too).

- :class:`FakeOpenAIServer`, :class:`FakeAnthropicServer`: HTTP on 127.0.0.1 (a free port),
  scripted with :class:`Reply` / :class:`Answer`, every request logged;
- replies for normal text, tool-call deltas, reasoning/thinking with a signature, usage with
  cache reads and writes, error statuses (429 with ``Retry-After``, 500, 401, a context-length
  400), and broken streams (mid-stream disconnect, malformed event, truncated body, in-stream
  error event).

See ``docs/workers/providers.md``.
"""

from __future__ import annotations

from tackroom.testing.fake_llm.replies import Answer, Cut, FakeToolCall, FakeUsage, Reply
from tackroom.testing.fake_llm.server import (
    FakeAnthropicServer,
    FakeLLMServer,
    FakeOpenAIServer,
    LoggedRequest,
)

__all__ = [
    "Answer",
    "Cut",
    "FakeAnthropicServer",
    "FakeLLMServer",
    "FakeOpenAIServer",
    "FakeToolCall",
    "FakeUsage",
    "LoggedRequest",
    "Reply",
]
