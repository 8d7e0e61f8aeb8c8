"""The pure pieces of a context budget, shared by the orchestrator and the compactor.

Sizes are counted in characters of what a provider sends (text, tool-call arguments, result
text; an image as a fixed cost) and turned into tokens with a per-model *characters per token*
that the provider's reported usage calibrates (:class:`TokenEstimator`): no tokenizer is
downloaded or run, and the estimate converges on what the provider counts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from tackroom.contracts.catalog import Prices
from tackroom.contracts.context import (
    COMPACTION_TYPE,
    CompactionDetails,
    ContextSettings,
)
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    FunctionCallBlock,
    FunctionResultBlock,
    FunctionResultMessage,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    Usage,
    UserMessage,
)
from tackroom.contracts.provenance import Label, joined

__all__ = [
    "DEFAULT_CHARS_PER_TOKEN",
    "IMAGE_CHARS",
    "MAX_RESERVE_TOKENS",
    "MESSAGE_OVERHEAD_CHARS",
    "TokenEstimator",
    "choose_cut",
    "compaction_details",
    "estimate_cost",
    "first_turn",
    "message_chars",
    "prompt_tokens",
    "summary_label",
    "summary_message",
    "window_and_reserve",
]

DEFAULT_CHARS_PER_TOKEN = 3.5
"""Before any usage is reported: a little under English prose's ~4, so the first estimate errs
on the side of fitting."""
MESSAGE_OVERHEAD_CHARS = 16
"""Role markers and separators every message costs on the wire."""
IMAGE_CHARS = 4_000
"""An image, as characters: providers bill one at about a thousand tokens."""
_MIN_CPT, _MAX_CPT = 1.0, 8.0
MAX_RESERVE_TOKENS = 16_384
"""The most a default reserve for the answer takes (a model's output limit may be far larger)."""


def window_and_reserve(
    *, context_window: int | None, max_output_tokens: int | None, settings: ContextSettings
) -> tuple[int, int] | None:
    """The window a run's context is budgeted in and the tokens kept for the answer: the model's
    window (or ``context_window_limit`` when smaller or the model's is unknown) and
    ``reserve_tokens`` (default: the model's output limit, at most :data:`MAX_RESERVE_TOKENS` and a
    quarter of the window), raised so that the prompt takes at most ``max_fill`` of the model's
    own window (a ``context_window_limit`` below that is the operator's own choice of room and is
    not cut again). ``None``: no window is known."""
    limit = settings.context_window_limit
    if context_window is None and limit is None:
        return None
    window = min(w for w in (context_window, limit) if w is not None)
    reserve = settings.reserve_tokens
    if reserve is None:
        reserve = min(max_output_tokens or MAX_RESERVE_TOKENS, MAX_RESERVE_TOKENS, window // 4)
    if context_window is not None:  # the prompt fills at most max_fill of the model's own window
        reserve = max(reserve, window - math.floor(context_window * settings.max_fill))
    return window, min(reserve, window - 1)


def first_turn(ids: Sequence[str], messages: Sequence[AgentMessage]) -> list[str]:
    """The entries of a path's first user turn: its user messages before the first answer (what
    ``pin_first_turn`` carries whole)."""
    found: list[str] = []
    for entry_id, message in zip(ids, messages, strict=True):
        if isinstance(message, AssistantMessage):
            break
        if isinstance(message, UserMessage):
            found.append(entry_id)
    return found


def message_chars(message: AgentMessage) -> int:
    """Characters ``message`` puts on the wire (its text, arguments, results; images fixed)."""
    total = MESSAGE_OVERHEAD_CHARS
    for block in message.content:
        match block:
            case TextBlock(text=text) | ThinkingBlock(text=text):
                total += len(text)
            case ImageBlock():
                total += IMAGE_CHARS
            case FunctionCallBlock(tool_name=name, arguments=arguments):
                total += len(name) + len(json.dumps(arguments, separators=(",", ":")))
            case FunctionResultBlock(content=content):
                total += sum(
                    len(b.text) if isinstance(b, TextBlock) else IMAGE_CHARS for b in content
                )
    return total


def prompt_tokens(usage: Usage) -> int:
    """Every prompt token the provider counted, cached or not."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


class TokenEstimator:
    """Characters per token, per ``provider:model``, calibrated by reported usage.

    Each model call tells how many characters were sent and how many prompt tokens the provider
    counted; the ratio moves the estimate halfway towards what was seen (a moving average that
    settles in a few calls and does not jump on one odd call).
    """

    def __init__(self, *, default: float = DEFAULT_CHARS_PER_TOKEN) -> None:
        self._default = default
        self._ratio: dict[str, float] = {}

    def chars_per_token(self, model_key: str) -> float:
        return self._ratio.get(model_key, self._default)

    def tokens(self, chars: int, model_key: str) -> int:
        return math.ceil(chars / self.chars_per_token(model_key))

    def observe(self, model_key: str, *, chars: int, usage: Usage) -> None:
        counted = prompt_tokens(usage)
        if counted <= 0 or chars <= 0:
            return
        seen = min(_MAX_CPT, max(_MIN_CPT, chars / counted))
        current = self._ratio.get(model_key)
        self._ratio[model_key] = seen if current is None else (current + seen) / 2


def compaction_details(message: AgentMessage) -> CompactionDetails | None:
    """The provenance of a compaction entry's message; ``None`` for any other message (or a
    compaction whose details do not read, which is then just a note)."""
    if not isinstance(message, CustomMessage) or message.custom_type != COMPACTION_TYPE:
        return None
    try:
        return CompactionDetails.model_validate(message.details)
    except ValidationError:
        return None


def summary_message(message: CustomMessage) -> UserMessage:
    """How the model reads a compaction: its summary, as a user message saying what it is (the
    provenance in its details is for people and tools), as trusted as what it summarised."""
    text = "".join(block.text for block in message.content if isinstance(block, TextBlock))
    read = UserMessage.text(f"[Summary of the earlier conversation, compacted to fit]\n{text}")
    return read.model_copy(update={"label": message.label})


def summary_label(messages: Sequence[AgentMessage]) -> Label | None:
    """The label of a summary of ``messages`` (an earlier summary among them): untrusted when any
    of them is, secret when any is; ``None`` when all are what their roles say."""
    return joined(
        message.label
        for message in messages
        if isinstance(message, (UserMessage, FunctionResultMessage, CustomMessage))
    )


@dataclass(frozen=True, slots=True)
class Cut:
    """Entries ``[start, index)`` are summarised; ``[index, end)`` are kept whole."""

    index: int
    kept_chars: int


def choose_cut(
    messages: Sequence[AgentMessage],
    sizes: Sequence[int],
    *,
    floor: int,
    keep_last: int,
    keep_chars: int,
) -> Cut | None:
    """Where to cut ``messages`` so the newest part fits ``keep_chars``; everything before
    ``floor`` is summarised whatever fits (it is already behind an earlier summary).

    Keeps at least ``keep_last`` entries where it can, never starts the kept part on a function
    result (a result travels with the call before it), and summarises at least one entry;
    ``None`` when nothing can be summarised.
    """
    end = len(messages)
    index, kept = end, 0
    while index > floor and kept + sizes[index - 1] <= keep_chars:
        index -= 1
        kept += sizes[index]
    index = max(floor, min(index, end - keep_last))
    forward = index
    while forward < end and _is_result(messages[forward]):
        forward += 1
    if forward < end:
        index = forward
    else:
        while index > floor and index < end and _is_result(messages[index]):
            index -= 1
    if index <= 0 or index >= end:
        return None
    return Cut(index=index, kept_chars=sum(sizes[index:end]))


def _is_result(message: AgentMessage) -> bool:
    if isinstance(message, FunctionResultMessage):
        return True
    return isinstance(message, UserMessage) and any(
        isinstance(block, FunctionResultBlock) for block in message.content
    )


def estimate_cost(
    prices: Prices | None,
    *,
    input_chars: int,
    output_tokens: int,
    chars_per_token: float = 4.0,
) -> float:
    """USD for ``input_chars`` of prompt and ``output_tokens`` out (0 without prices)."""
    if prices is None:
        return 0.0
    input_tokens = input_chars / chars_per_token
    per_million = 1_000_000
    return round(
        input_tokens * prices.input / per_million + output_tokens * prices.output / per_million,
        6,
    )
