"""A model call's context, assembled from the session's active path within the budget.

The budget is the model's window (the catalog's, or the run's ``context_window_limit`` when
smaller) minus ``reserve_tokens`` for the answer, at most ``max_fill`` of the model's window. The
system prompt, the tools and every pinned entry go whole (with ``pin_first_turn``, the session's
first user turn is one); the history goes from the latest compaction on (its summary, then the
entries it kept, then what came after). When that does not fit, the compactor
(``compaction::compact``) summarises more of it first, and the path is read again.

Per session the assembler keeps, next to the cached path, each entry as the model reads it
(results clipped, rules and recalled memories as user text), its size and running totals, so
one call costs what is new on the path plus a slice copy — not a pass over the whole history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from opentelemetry import trace
from pydantic import ValidationError

from tackroom.contracts.context import (
    COMPACT,
    PINNED_RULE_TYPE,
    RECALL_TYPE,
    CompactionDetails,
    CompactRequest,
    ContextSettings,
)
from tackroom.contracts.events import ContextAssembledData
from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    TextBlock,
    Usage,
    UserMessage,
)
from tackroom.engine.errors import EngineError, FunctionNotFound, unavailable_cause
from tackroom.engine.protocol import Engine
from tackroom.engine.tracing import current_tracer
from tackroom.kit.context import (
    TokenEstimator,
    compaction_details,
    first_turn,
    message_chars,
    summary_message,
    window_and_reserve,
)
from tackroom.workers.orchestrator.clipping import (
    ResultLimits,
    clip_message,
    handle_of,
    hidden,
)
from tackroom.workers.orchestrator.models import ModelInfoCache
from tackroom.workers.orchestrator.recall import recall
from tackroom.workers.orchestrator.record import ToolOffer, TurnRecord
from tackroom.workers.orchestrator.sentprompt import Origins, PathSources
from tackroom.workers.orchestrator.transcript import PathView, SessionsClient

__all__ = ["Assembled", "ContextAssembler", "context_overflow", "mark_span"]

_RENDERED_CUSTOM = frozenset({PINNED_RULE_TYPE, RECALL_TYPE})


@dataclass(slots=True)
class Assembled:
    """What one model call sends, and the budget decision (``None`` when no budget is known)."""

    messages: list[AgentMessage]
    chars: int
    model_key: str
    decision: ContextAssembledData | None = None
    overflow: str | None = None
    """Why the context cannot fit, in words a person can act on."""
    origins: Origins | None = None
    """Where each message comes from on the path (what the call's record refers to)."""


@dataclass(slots=True)
class _Derived:
    """Per-entry facts of one path view, extended as the view grows."""

    generation: int
    limits: ResultLimits
    pinned: tuple[str, ...]
    read: list[AgentMessage] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    totals: list[int] = field(default_factory=lambda: [0])
    """``totals[i]``: the size of entries ``[0, i)``."""
    index: dict[str, int] = field(default_factory=dict)
    compaction: int | None = None
    compaction_id: str | None = None
    details: CompactionDetails | None = None
    sources: PathSources = field(default_factory=PathSources)

    def span(self, start: int, end: int) -> int:
        return self.totals[end] - self.totals[start]


class ContextAssembler:
    def __init__(
        self,
        engine: Engine,
        *,
        sessions: SessionsClient,
        models: ModelInfoCache,
        defaults: ContextSettings,
        default_result_limit: int,
        compaction_function: str | None,
        compaction_timeout: float = 300.0,
    ) -> None:
        self._engine = engine
        self._sessions = sessions
        self._models = models
        self._defaults = defaults
        self._default_limit = default_result_limit
        self._compact = None if compaction_function is None else COMPACT.at(compaction_function)
        self._compact_timeout = compaction_timeout
        self.estimator = TokenEstimator()
        self._derived: dict[str, _Derived] = {}
        self._tool_chars: dict[int, tuple[list[ToolOffer], int]] = {}

    def settings(self, record: TurnRecord) -> ContextSettings:
        return record.context or self._defaults

    async def assemble(self, record: TurnRecord) -> Assembled:
        settings = self.settings(record)
        model_key = f"{record.provider}:{record.model}"
        recalled = 0
        if settings.recall is not None:
            view = await self._sessions.view(record.session_id)
            cpt = self.estimator.chars_per_token(model_key)
            recalled = await recall(
                self._engine, self._sessions, record, view, settings.recall, chars_per_token=cpt
            )
        derived = await self._derive(record)
        fixed = len(record.system_prompt) + self._tools_chars(record.tools)
        messages, history, pinned, origins = _sequence(derived)
        window = await self._window(record, settings)
        if window is None:
            return Assembled(messages, fixed + history, model_key, origins=origins)
        window_tokens, reserve = window
        budget = window_tokens - reserve
        compacted = False
        if self.estimator.tokens(fixed + history, model_key) > budget and settings.compact:
            problem = await self._compact_now(record, settings, derived, fixed=fixed, budget=budget)
            if problem is not None:
                return Assembled(messages, fixed + history, model_key, overflow=problem)
            compacted = True
            derived = await self._derive(record)
            messages, history, pinned, origins = _sequence(derived)
        estimated = self.estimator.tokens(fixed + history, model_key)
        decision = ContextAssembledData(
            message_id=record.entry_id(f"t{record.turn_count + 1}-a"),
            window_tokens=window_tokens,
            reserve_tokens=reserve,
            budget_tokens=budget,
            estimated_tokens=estimated,
            system_tokens=self.estimator.tokens(len(record.system_prompt), model_key),
            tools_tokens=self.estimator.tokens(self._tools_chars(record.tools), model_key),
            history_tokens=self.estimator.tokens(history, model_key),
            entries_sent=len(messages),
            pinned=pinned,
            compaction_entry_id=derived.compaction_id,
            compacted=compacted,
            recalled=recalled,
            chars_per_token=round(self.estimator.chars_per_token(model_key), 3),
        )
        overflow = None
        if estimated > budget:
            overflow = (
                f"the context needs ~{estimated} tokens but the budget is {budget}"
                f" ({window_tokens} window - {reserve} reserved for the answer)"
                + ("" if settings.compact else "; compaction is off for this agent")
                + ": raise context_window_limit, lower keep_last or unpin large entries"
            )
        return Assembled(messages, fixed + history, model_key, decision, overflow, origins)

    def observe(self, assembled: Assembled, usage: Usage) -> None:
        """Calibrate the estimate with what the provider counted for this call."""
        self.estimator.observe(assembled.model_key, chars=assembled.chars, usage=usage)

    async def _window(
        self, record: TurnRecord, settings: ContextSettings
    ) -> tuple[int, int] | None:
        info = await self._models.get(record.provider, record.model)
        return window_and_reserve(
            context_window=None if info is None else info.context_window,
            max_output_tokens=None if info is None else info.max_output_tokens,
            settings=settings,
        )

    async def _compact_now(
        self,
        record: TurnRecord,
        settings: ContextSettings,
        derived: _Derived,
        *,
        fixed: int,
        budget: int,
    ) -> str | None:
        """Ask the compactor; the reason it could not help, or ``None`` once it did."""
        if self._compact is None:
            return "the history does not fit the context and no compactor is configured"
        model_key = f"{record.provider}:{record.model}"
        # Pinned entries are never summarised: wherever they are, they take their room.
        pinned_chars = sum(derived.sizes[i] for i in _carried(derived, len(derived.read)))
        target = budget - self.estimator.tokens(fixed + pinned_chars, model_key)
        if target <= 0:
            return (
                f"the system prompt, tools and pinned entries alone take more than the budget of"
                f" {budget} tokens: shorten them or unpin entries"
            )
        request = CompactRequest(
            session_id=record.session_id,
            provider=record.provider,
            model=record.model,
            target_tokens=target,
            keep_last=settings.keep_last,
            pinned=list(derived.pinned) if settings.pin_first_turn else [],
            chars_per_token=self.estimator.chars_per_token(model_key),
            run_id=record.run_id,
            principal=record.principal,
        )
        try:
            reply = await self._compact.call(self._engine, request, timeout=self._compact_timeout)
        except FunctionNotFound:
            return f"the history does not fit the context and no worker serves {self._compact.id}"
        except (EngineError, ValidationError) as exc:
            if unavailable_cause(exc) is not None:
                raise
            return f"compacting the history failed: {exc}"
        if not reply.compacted and reply.entry_id is None:
            return f"the history does not fit the context and cannot be compacted: {reply.detail}"
        return None

    async def _derive(self, record: TurnRecord) -> _Derived:
        view = await self._sessions.view(record.session_id)
        limits = ResultLimits.of_tools(
            record.tools,
            default_limit=self._default_limit,
            hide_untrusted=record.mode == "planned",
        )
        pinned = _pins(view, self.settings(record))
        derived = self._derived.get(record.session_id)
        if (
            derived is None
            or derived.generation != view.generation
            or derived.limits != limits
            or len(derived.read) > len(view.ids)
            or (derived.pinned != pinned and _notes_repinned(derived, view, pinned))
        ):
            derived = _Derived(generation=view.generation, limits=limits, pinned=pinned)
            self._derived[record.session_id] = derived
            if len(self._derived) > 1024:
                self._derived.pop(next(iter(self._derived)))
        derived.pinned = pinned
        _extend(derived, view)
        return derived

    def _tools_chars(self, tools: list[ToolOffer]) -> int:
        cached = self._tool_chars.get(id(tools))
        if cached is not None and cached[0] is tools:
            return cached[1]
        chars = sum(
            len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
            for tool in tools
        )
        self._tool_chars[id(tools)] = (tools, chars)
        if len(self._tool_chars) > 256:
            self._tool_chars.pop(next(iter(self._tool_chars)))
        return chars


def _extend(derived: _Derived, view: PathView) -> None:
    for position in range(len(derived.read), len(view.ids)):
        entry_id, message = view.ids[position], view.messages[position]
        details = compaction_details(message)
        if details is not None and isinstance(message, CustomMessage):
            derived.compaction, derived.compaction_id = position, entry_id
            derived.details = details
            read: AgentMessage = summary_message(message)
            if derived.limits.hide_untrusted and hidden(message):
                read = handle_of(entry_id, message)
        else:
            read = _as_read(entry_id, message, view.pinned, derived.limits)
        derived.read.append(read)
        derived.sources.add(entry_id, rendered=read is not message)
        size = 0 if isinstance(read, CustomMessage) else message_chars(read)
        derived.sizes.append(size)
        derived.totals.append(derived.totals[-1] + size)
        derived.index[entry_id] = position


def _as_read(
    entry_id: str, message: AgentMessage, pinned: tuple[str, ...], limits: ResultLimits
) -> AgentMessage:
    if isinstance(message, CustomMessage):
        if message.custom_type in _RENDERED_CUSTOM or entry_id in pinned:
            return UserMessage(content=list(message.content))
        return message  # an application's note: providers skip it
    return clip_message(
        entry_id,
        message,
        limit_of=limits.limit_of,
        reader=limits.reader,
        hide_untrusted=limits.hide_untrusted,
    )


def _pins(view: PathView, settings: ContextSettings) -> tuple[str, ...]:
    """The entries carried whole: the session's pins, and with ``pin_first_turn`` its first user
    turn (found again each call: a few entries from the path's start)."""
    if not settings.pin_first_turn:
        return view.pinned
    extra = [entry for entry in first_turn(view.ids, view.messages) if entry not in view.pinned]
    return (*view.pinned, *extra) if extra else view.pinned


def _notes_repinned(derived: _Derived, view: PathView, pinned: tuple[str, ...]) -> bool:
    """Whether a note the model reads only when pinned was pinned or unpinned (rare: the
    entries are then read again; a pinned message of any other kind reads the same)."""
    for entry_id in set(derived.pinned) ^ set(pinned):
        position = derived.index.get(entry_id)
        if position is not None and isinstance(view.messages[position], CustomMessage):
            return True
    return False


def _kept_start(derived: _Derived) -> int:
    """The first entry sent whole: the compaction's first kept entry (or the path's start)."""
    if derived.compaction is None or derived.details is None:
        return 0
    kept = derived.index.get(derived.details.first_kept_entry_id, derived.compaction)
    return min(kept, derived.compaction)


def _carried(derived: _Derived, start: int) -> list[int]:
    """Pinned entries before ``start``, oldest first: carried whole over the compaction."""
    return sorted(
        position
        for entry_id in derived.pinned
        if (position := derived.index.get(entry_id)) is not None and position < start
    )


def _sequence(derived: _Derived) -> tuple[list[AgentMessage], int, int, Origins]:
    """The messages to send, their size, how many pinned entries they carry, and where each
    comes from on the path."""
    end = len(derived.read)
    pinned_here = sum(1 for e in derived.pinned if e in derived.index)
    if derived.compaction is None:
        origins = Origins(derived.sources, [range(end)])
        return derived.read[:end], derived.totals[end], pinned_here, origins
    compaction = derived.compaction
    start = _kept_start(derived)
    carried = _carried(derived, start)
    segments = [
        *(range(position, position + 1) for position in carried),
        range(compaction, compaction + 1),
        range(start, compaction),
        range(compaction + 1, end),
    ]
    messages = [derived.read[i] for i in carried]
    messages.append(derived.read[compaction])
    messages.extend(derived.read[start:compaction])
    messages.extend(derived.read[compaction + 1 : end])
    size = (
        sum(derived.sizes[i] for i in carried)
        + derived.sizes[compaction]
        + derived.span(start, compaction)
        + derived.span(compaction + 1, end)
    )
    return messages, size, pinned_here, Origins(derived.sources, segments)


def context_overflow(reason: str) -> AssistantMessage:
    """The model call that was not made: the run ends with ``context_overflow`` and why."""
    return AssistantMessage(
        content=[TextBlock(text=reason)],
        stop_reason="error",
        error_kind="context_overflow",
        error_message=reason,
    )


def mark_span(decision: ContextAssembledData) -> None:
    """The budget decision as attributes of the step's span (nothing with tracing off)."""
    if current_tracer() is None:
        return
    span = trace.get_current_span()
    span.set_attribute("tackroom.context.window_tokens", decision.window_tokens)
    span.set_attribute("tackroom.context.budget_tokens", decision.budget_tokens)
    span.set_attribute("tackroom.context.estimated_tokens", decision.estimated_tokens)
    span.set_attribute("tackroom.context.entries_sent", decision.entries_sent)
    span.set_attribute("tackroom.context.compacted", decision.compacted)
