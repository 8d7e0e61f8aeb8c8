"""The context a model call reads, and the ``compactor`` worker's public face.

Before each model call the orchestrator assembles the context from the session's active path
within a **budget**: the model's window (from the catalog, or ``context_window_limit`` when
smaller) minus ``reserve_tokens`` for the answer, and at most ``max_fill`` (85 %) of the model's
own window. The system prompt, the tools and every pinned entry always go whole
(``pin_first_turn``: the session's first user turn too). When the history does not fit, the
orchestrator asks ``compaction::compact``: the compactor summarises the oldest part with a
model call and appends a **compaction entry** to the session tree — a ``CustomMessage`` of
``custom_type`` ``"compaction"`` whose ``details`` (:class:`CompactionDetails`) name the entries
it replaces. The replaced entries stay in the tree: a fork from before the compaction still
reads them.

A compaction entry's id is derived from the leaf it was computed at (:func:`compaction_entry_id`),
and appends are idempotent by id, so a compaction repeated after a crash stores one entry.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.bus import Function
from tackroom.contracts.memory import MemoryScope
from tackroom.contracts.principal import Principal

__all__ = [
    "COMPACT",
    "COMPACTION_TYPE",
    "DEFAULT_MAX_FILL",
    "PINNED_RULE_TYPE",
    "RECALL_TYPE",
    "SCHEMA_VERSION",
    "CompactRequest",
    "CompactResponse",
    "CompactionDetails",
    "ContextSettings",
    "RecallSettings",
    "compaction_entry_id",
]

SCHEMA_VERSION = 1

DEFAULT_MAX_FILL = 0.85
"""Seed 003, 4.2: a 32K model's prompt is best kept at 24K to 28K (75 to 87 %): near a full window
generation slows and tail latency grows. The answer's reserve usually keeps the prompt lower."""

COMPACTION_TYPE = "compaction"
"""``custom_type`` of a compaction entry (stored with entry type ``compaction``)."""
PINNED_RULE_TYPE = "rule"
"""``custom_type`` of a rule pinned as text (``tackroom sessions pin --text``): the model reads it
as a user message, verbatim, in every context."""
RECALL_TYPE = "memory_recall"
"""``custom_type`` of the memories recalled for a run's first model call (kept in the tree, so
every later call of the run, a replay and a UI see the same ones)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecallSettings(_Model):
    """Automatic recall: before a run's first model call, the best memory matches for the
    user's message are kept in the session as a note the model reads. ``scope``: the memory
    searched (default: the memory worker's own)."""

    top_k: int = Field(default=3, ge=1, le=20)
    max_tokens: int = Field(default=1_000, ge=50, description="at most this much recalled text")
    scope: MemoryScope | None = None


class ContextSettings(_Model):
    """How a run's context is budgeted (per agent: ``agent.context`` in ``tackroom.yaml``, the
    Harness's ``context=``, or a run request's ``context``)."""

    context_window_limit: int | None = Field(
        default=None,
        ge=256,
        description="at most this many tokens of window, below the model's own (None: the model's)",
    )
    reserve_tokens: int | None = Field(
        default=None,
        ge=0,
        description="tokens kept free for the answer (None: the model's output limit, at most a"
        " quarter of the window)",
    )
    keep_last: int = Field(
        default=4, ge=1, le=1000, description="the newest entries a compaction never summarises"
    )
    compact: bool = Field(
        default=True,
        description="summarise the oldest history when it does not fit (False: fail with"
        " context_overflow instead)",
    )
    recall: RecallSettings | None = None
    pin_first_turn: bool = Field(
        default=False,
        exclude_if=lambda value: value is False,
        description="carry the session's first user turn whole in every context, as a pinned"
        " entry: never summarised, never dropped (seed 003: the constraints a user states first"
        " are lost when the history is cut)",
    )
    max_fill: float = Field(
        default=DEFAULT_MAX_FILL,
        gt=0,
        le=1,
        exclude_if=lambda value: value == DEFAULT_MAX_FILL,
        description="the share of the model's own window the prompt may fill at most, whatever"
        " the reserve (seed 003: generation slows near a full window)",
    )


class CompactionDetails(_Model):
    """The provenance a compaction entry carries (``CustomMessage.details``)."""

    schema_version: int = SCHEMA_VERSION
    replaces: list[str] = Field(description="the entry ids the summary stands for, oldest first")
    first_kept_entry_id: str = Field(
        description="the oldest entry sent whole after the summary (it precedes this entry)"
    )
    previous_compaction_id: str | None = Field(
        default=None, description="the compaction this one folds in (its summary is included)"
    )
    provider: str
    model: str
    tokens_before: int = Field(description="estimated tokens of the history it replaced")
    tokens_after: int = Field(description="estimated tokens of the summary")
    reason: Literal["budget", "manual"] = "budget"


class CompactRequest(_Model):
    session_id: str = Field(min_length=1, max_length=200)
    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    target_tokens: int = Field(
        ge=1,
        description="the history (summary and kept entries) should fit in this many tokens",
    )
    keep_last: int = Field(default=4, ge=1)
    pinned: list[str] = Field(
        default_factory=list,
        exclude_if=lambda value: not value,
        description="entries the caller carries whole besides the session's pins (the first"
        " turn of a run with pin_first_turn): never summarised either",
    )
    chars_per_token: float = Field(
        default=4.0, gt=0, description="the caller's calibrated estimate for this model"
    )
    reason: Literal["budget", "manual"] = "budget"
    run_id: str | None = None
    principal: Principal | None = None


class CompactResponse(_Model):
    schema_version: int = SCHEMA_VERSION
    compacted: bool
    entry_id: str | None = Field(default=None, description="the compaction entry (new or found)")
    replaced: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    detail: str = Field(default="", description="why nothing was compacted, in words")


COMPACT: Function[CompactRequest, CompactResponse] = Function(
    "compaction::compact",
    CompactRequest,
    CompactResponse,
    description="Summarise the oldest part of a session's active path into a compaction entry "
    "(pinned entries are carried, never summarised); idempotent for one leaf.",
)


def compaction_entry_id(leaf_entry_id: str) -> str:
    """The id of the compaction computed at ``leaf_entry_id``: the same on every retry."""
    entry = f"compaction-{leaf_entry_id}"
    if len(entry) <= 200:
        return entry
    return f"compaction-h{hashlib.sha256(leaf_entry_id.encode()).hexdigest()[:32]}"
