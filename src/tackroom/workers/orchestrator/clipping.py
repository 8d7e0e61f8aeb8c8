"""Clipping function results for the model: the session keeps a result whole, the model reads
at most its limit of it.

A result whose size (text characters plus the base64 characters of its images) is over its
limit is sent as one text block: its head, a note, its tail. The note names the session entry
holding the result and the offset to read on from with ``results::read``; images are replaced by
a one-line placeholder, and text that looks like base64 or binary shows a short head only. The
check is a length sum per result, so a transcript of small results costs next to nothing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tackroom.contracts.messages import (
    AgentMessage,
    FunctionResultMessage,
    ImageBlock,
    TextBlock,
    UserMessage,
)
from tackroom.contracts.results import RESULTS_READ
from tackroom.workers.orchestrator.record import ToolOffer

__all__ = [
    "BINARY_HEAD_CHARS",
    "DEFAULT_MAX_RESULT_CHARS",
    "MIN_RESULT_CHARS",
    "ResultLimits",
    "clip_for_run",
    "clip_message",
    "clip_text",
    "clip_transcript",
    "looks_binary",
    "page_of",
    "result_size",
    "result_text",
]

DEFAULT_MAX_RESULT_CHARS = 16_000
"""About 4,000 tokens: a page of code or a log's worth, small next to any context window."""
MIN_RESULT_CHARS = 1_000
"""The least a limit may be: the note itself takes about 200 characters."""
BINARY_HEAD_CHARS = 256
"""What the model sees of text that looks like base64 or binary (the tail is dropped)."""

_JOINERS = frozenset("\u200d\ufe0e\ufe0f")
_SAMPLE = 4096
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")


def result_size(message: FunctionResultMessage) -> int:
    """Characters the model would read: text, and the base64 data of images."""
    return sum(
        len(block.text) if isinstance(block, TextBlock) else len(block.data)
        for block in message.content
    )


def result_text(message: FunctionResultMessage) -> str:
    """The text ``results::read`` pages through: text blocks joined by a newline, each image as
    a placeholder line."""
    return "\n".join(
        block.text if isinstance(block, TextBlock) else _image_placeholder(block)
        for block in message.content
    )


def _image_placeholder(block: ImageBlock) -> str:
    return f"[image {block.mime}: {len(block.data)} base64 characters, not shown]"


@dataclass(frozen=True, slots=True)
class ResultLimits:
    """How a run's results are clipped: its tools' own limits, the default for the others (and
    for results of tools no longer offered), and the name the model knows ``results::read`` by.
    Equal for equal tool lists, so a cache of clipped results can be keyed by it."""

    default: int
    table: tuple[tuple[str, int], ...]
    reader: str
    hide_untrusted: bool = False
    """Planned mode: an untrusted result reaches the model as a handle, never as text."""

    @classmethod
    def of_tools(
        cls, tools: Sequence[ToolOffer], *, default_limit: int, hide_untrusted: bool = False
    ) -> ResultLimits:
        table = tuple(
            sorted(
                (tool.function_id, tool.traits.max_result_chars)
                for tool in tools
                if tool.traits.max_result_chars is not None
            )
        )
        reader = next((t.name for t in tools if t.function_id == RESULTS_READ.id), RESULTS_READ.id)
        return cls(default_limit, table, reader, hide_untrusted)

    def limit_of(self, function_id: str) -> int:
        return next((limit for fid, limit in self.table if fid == function_id), self.default)


def clip_for_run(
    entries: Sequence[tuple[str, AgentMessage]],
    tools: Sequence[ToolOffer],
    *,
    default_limit: int,
) -> list[AgentMessage]:
    """:func:`clip_transcript` with the limits a run's offered tools declare."""
    limits = ResultLimits.of_tools(tools, default_limit=default_limit)
    return clip_transcript(entries, limit_of=limits.limit_of, reader=limits.reader)


def clip_transcript(
    entries: Sequence[tuple[str, AgentMessage]],
    *,
    limit_of: Callable[[str], int],
    reader: str = RESULTS_READ.id,
) -> list[AgentMessage]:
    """The messages of ``entries`` (entry id, message), each result over its limit clipped.

    ``limit_of(function_id)``: the characters a result of that function may show; ``reader``:
    the name the model knows ``results::read`` by. A ``results::read`` page is never clipped
    again (its length is capped by the request).
    """
    return [
        clip_message(entry_id, message, limit_of=limit_of, reader=reader)
        for entry_id, message in entries
    ]


def clip_message(
    entry_id: str,
    message: AgentMessage,
    *,
    limit_of: Callable[[str], int],
    reader: str,
    hide_untrusted: bool = False,
) -> AgentMessage:
    """``message`` as the model reads it: a result over its limit clipped, an untrusted one a
    handle when ``hide_untrusted``, anything else as is."""
    if hide_untrusted and hidden(message):
        return handle_of(entry_id, message)
    if isinstance(message, FunctionResultMessage) and message.function_id != RESULTS_READ.id:
        limit = max(limit_of(message.function_id), MIN_RESULT_CHARS)
        if result_size(message) > limit:
            return _clipped(message, entry_id=entry_id, limit=limit, reader=reader)
    return message


def hidden(message: AgentMessage) -> bool:
    """Is ``message`` what planned mode shows only as a handle: untrusted free text (values a
    quarantined reader typed are shown)?"""
    label = getattr(message, "label", None)
    return label is not None and label.untrusted and not label.typed


def handle_of(entry_id: str, message: AgentMessage) -> AgentMessage:
    """The stand-in planned mode shows for untrusted ``message``: where it is, how long, from
    where, and how to read values out of it."""
    label = getattr(message, "label", None)
    origins = ", ".join(label.origins) if label is not None and label.origins else "a tool"
    size = len(result_text(message)) if isinstance(message, FunctionResultMessage) else 0
    chars = f"{size:,} characters" if size else "text"
    text = (
        f"[untrusted content from {origins}: {chars} in entry {entry_id}, not shown (planned"
        " mode). To use a value from it, call quarantine__extract with this entry_id and a"
        " schema of the values you need.]"
    )
    if isinstance(message, FunctionResultMessage):
        return message.model_copy(update={"content": [TextBlock(text=text)], "details": None})
    return UserMessage.text(text)


def _clipped(
    message: FunctionResultMessage, *, entry_id: str, limit: int, reader: str
) -> FunctionResultMessage:
    text = result_text(message)
    if len(text) > limit:
        text = clip_text(text, limit=limit, entry_id=entry_id, reader=reader)
    # ``details`` repeats the whole value and no model reads it: it stays in the session only.
    return message.model_copy(update={"content": [TextBlock(text=text)], "details": None})


def clip_text(text: str, *, limit: int, entry_id: str, reader: str = RESULTS_READ.id) -> str:
    """``text`` as head + note + tail in at most ``limit`` characters (when ``limit`` leaves
    room for the note); cuts never split a character from its combining marks."""
    total = len(text)
    binary = looks_binary(text)
    widest = _note(entry_id, reader, shown=total, total=total, head_end=total, binary=binary)
    budget = max(limit - len(widest), 0)
    if binary:
        head_end, tail_start = _cut(text, min(budget, BINARY_HEAD_CHARS)), total
    else:
        head_end = _cut(text, budget * 3 // 4)
        tail_start = _cut_forward(text, total - (budget - head_end))
    shown = head_end + (total - tail_start)
    note = _note(entry_id, reader, shown=shown, total=total, head_end=head_end, binary=binary)
    return text[:head_end] + note + text[tail_start:]


def _note(
    entry_id: str, reader: str, *, shown: int, total: int, head_end: int, binary: bool
) -> str:
    what = "characters (this looks like binary or base64)" if binary else "characters"
    return (
        f"\n…[clipped: {shown} of {total} {what} shown; call {reader} with "
        f'entry_id="{entry_id}" offset={head_end} to read more]…\n'
    )


def looks_binary(text: str) -> bool:
    """Whether the start of ``text`` is one long base64 run or holds control characters."""
    sample = text[:_SAMPLE]
    if not sample:
        return False
    controls = sum(1 for char in sample if char < " " and char not in "\n\r\t")
    if controls * 100 > len(sample):
        return True
    return len(sample) >= 512 and all(char in _BASE64 for char in sample)


def _inside_cluster(text: str, index: int) -> bool:
    """Whether a cut before ``text[index]`` would part a mark, a joiner or ``\\r\\n``."""
    char, before = text[index], text[index - 1]
    return (
        char in _JOINERS
        or unicodedata.combining(char) != 0
        or before == "\u200d"
        or (before == "\r" and char == "\n")
    )


def _cut(text: str, index: int) -> int:
    """``index`` moved back to a boundary where no mark or joiner is parted from its base."""
    index = min(max(index, 0), len(text))
    while 0 < index < len(text) and _inside_cluster(text, index):
        index -= 1
    return index


def _cut_forward(text: str, index: int) -> int:
    """``index`` moved forward to such a boundary (a tail drops a split cluster's remnant)."""
    index = min(max(index, 0), len(text))
    while 0 < index < len(text) and _inside_cluster(text, index):
        index += 1
    return index


def page_of(text: str, *, offset: int, length: int) -> tuple[str, int | None]:
    """``length`` characters of ``text`` from ``offset`` (ending on a boundary when it can), and
    where the next page starts (``None`` at the end)."""
    end = min(offset + length, len(text))
    if end < len(text):
        end = _cut(text, end)
        if end <= offset:  # one cluster longer than the page: cut inside it rather than stall
            end = min(offset + length, len(text))
    return text[offset:end], end if end < len(text) else None
