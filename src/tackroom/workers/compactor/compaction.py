"""Compacting a session: choose what to summarise, summarise it, append the compaction entry.

The live history is what the latest compaction kept plus what came after it. The newest part
that fits ``keep_ratio`` of the target (and at least ``keep_last`` entries) stays whole; the rest
— with the latest summary folded in — is summarised by a model call and replaced, in what the
model reads, by one compaction entry naming every entry it stands for. Pinned entries (the
session's, and those the request names: a run's first turn with ``pin_first_turn``) are never
summarised: the orchestrator carries them whole. The stored history is never changed.
"""

from __future__ import annotations

import functools
from importlib import resources
from string import Template

from pydantic import ValidationError

from tackroom.contracts.budget import CHECK, RECORD, CheckRequest, RecordRequest
from tackroom.contracts.catalog import MODELS_GET, GetRequest, Prices
from tackroom.contracts.context import (
    COMPACTION_TYPE,
    CompactionDetails,
    CompactRequest,
    CompactResponse,
    compaction_entry_id,
)
from tackroom.contracts.messages import (
    AgentMessage,
    CustomMessage,
    TextBlock,
    UserMessage,
    text_of,
)
from tackroom.contracts.provider import ProviderRequest
from tackroom.contracts.sessions import (
    APPEND_BATCH,
    MESSAGES,
    SESSION_NOT_FOUND_ERROR,
    AppendBatchRequest,
    BatchItem,
    MessagesRequest,
    MessagesResponse,
)
from tackroom.engine.errors import EngineError, FunctionError, InvocationError
from tackroom.engine.protocol import Engine
from tackroom.kit.context import (
    choose_cut,
    compaction_details,
    estimate_cost,
    message_chars,
    summary_label,
)
from tackroom.kit.hooks.modelcalls import CallIds, HookBlocked, ModelCallHooks
from tackroom.kit.providers.complete import complete
from tackroom.workers.compactor.transcript import chunks

__all__ = ["Compactor"]

_MIN_SUMMARY_TOKENS = 64
_MIN_CHUNK_CHARS = 4_000


@functools.cache
def _prompt() -> str:
    return (resources.files(__package__) / "prompt.md").read_text().strip()


class Compactor:
    def __init__(
        self,
        engine: Engine,
        *,
        model: str | None,
        keep_ratio: float,
        summary_ratio: float,
        budget_check_function: str | None,
        budget_record_function: str | None,
        timeout: float,
        hooks: ModelCallHooks,
    ) -> None:
        self._engine = engine
        self._model = None if model is None else _split_model(model)
        self._keep_ratio = keep_ratio
        self._summary_ratio = summary_ratio
        self._check = None if budget_check_function is None else CHECK.at(budget_check_function)
        self._record = None if budget_record_function is None else RECORD.at(budget_record_function)
        self._timeout = timeout
        self._hooks = hooks

    async def compact(self, request: CompactRequest) -> CompactResponse:
        try:
            path = await MESSAGES.call(
                self._engine, MessagesRequest(session_id=request.session_id), timeout=30.0
            )
        except InvocationError as exc:
            if exc.remote_code == SESSION_NOT_FOUND_ERROR:
                raise FunctionError(exc.remote_code, exc.message) from None
            raise
        if path.leaf_id is None:
            return CompactResponse(compacted=False, detail="the session is empty")
        entry_id = compaction_entry_id(path.leaf_id)
        if compaction_details(path.messages[-1].message) is not None:
            return CompactResponse(
                compacted=False,
                entry_id=path.leaf_id,
                detail="the history already ends in a compaction",
            )
        plan = _plan(path, request, keep_ratio=self._keep_ratio)
        if isinstance(plan, str):
            return CompactResponse(compacted=False, detail=plan)
        provider, model = self._model or (request.provider, request.model)
        summary_tokens = max(_MIN_SUMMARY_TOKENS, int(request.target_tokens * self._summary_ratio))
        text, cost = await self._summarise(
            request, plan, provider=provider, model=model, summary_tokens=summary_tokens
        )
        summary_chars = len(text)
        details = CompactionDetails(
            replaces=plan.replaces,
            first_kept_entry_id=plan.first_kept,
            previous_compaction_id=plan.previous_id,
            provider=provider,
            model=model,
            tokens_before=int(plan.replaced_chars / request.chars_per_token),
            tokens_after=int(summary_chars / request.chars_per_token),
            reason=request.reason,
        )
        entry = CustomMessage(
            custom_type=COMPACTION_TYPE,
            content=[TextBlock(text=text)],
            details=details.model_dump(mode="json"),
            # A summary of untrusted text is untrusted: it may carry the injected instructions.
            label=summary_label([*plan.previous, *plan.messages]),
        )
        await APPEND_BATCH.send(
            self._engine,
            # At the active leaf, not the one read: an entry appended meanwhile stays on the
            # path (and is kept whole: it comes after the first kept entry).
            AppendBatchRequest(
                session_id=request.session_id,
                entries=[BatchItem(entry_id=entry_id, message=entry)],
            ),
            timeout=30.0,
        )
        await self._settle(request, cost, record_id=entry_id)
        # Stored now, or by an attempt before a crash (appends are idempotent by id): one entry.
        return CompactResponse(
            compacted=True,
            entry_id=entry_id,
            replaced=len(plan.replaces),
            tokens_before=details.tokens_before,
            tokens_after=details.tokens_after,
        )

    async def _summarise(
        self,
        request: CompactRequest,
        plan: _Plan,
        *,
        provider: str,
        model: str,
        summary_tokens: int,
    ) -> tuple[str, float]:
        """The summary of ``plan`` (chunk by chunk when it is longer than the target), and what
        the calls cost."""
        words = max(int(summary_tokens * 0.7), 40)
        system = Template(_prompt()).substitute(words=str(words))
        room = max(int(request.target_tokens * request.chars_per_token), _MIN_CHUNK_CHARS)
        summary, cost = plan.previous_summary, 0.0
        for chunk in chunks(plan.messages, max_chars=room):
            before = f"Summary so far:\n{summary}\n\nThe conversation goes on:\n" if summary else ""
            await self._reserve(request, provider, model, len(chunk) + len(before), summary_tokens)
            ids = CallIds(request.session_id, request.run_id or "compaction", 0, provider, model)
            asked = await self._hooks.before(
                ids,
                ProviderRequest(
                    model=model,
                    system_prompt=system,
                    messages=[UserMessage.text(before + chunk)],
                    max_output_tokens=summary_tokens,
                    session_id=request.session_id,
                ),
            )
            if isinstance(asked, HookBlocked):
                raise FunctionError("blocked", f"the summary call was blocked: {asked.reason}")
            answer = await complete(self._engine, provider, asked, timeout=self._timeout)
            if answer.stop_reason == "error":
                raise FunctionError(
                    "summary_failed", f"the summary call failed: {answer.error_message}"
                )
            checked = await self._hooks.after(ids, answer)
            if isinstance(checked, HookBlocked):
                raise FunctionError("blocked", f"the summary was blocked: {checked.reason}")
            answer = checked
            cost += answer.usage.cost_usd
            summary = text_of(answer.content).strip() or summary
        limit = int(summary_tokens * request.chars_per_token * 1.5)
        if len(summary) > limit:
            summary = summary[: limit - 1] + "…"
        return summary, cost

    async def _reserve(
        self, request: CompactRequest, provider: str, model: str, chars: int, out: int
    ) -> None:
        """Refuse, with the budget's reason, a summary the session's budgets cannot pay."""
        if self._check is None:
            return
        estimate = estimate_cost(
            await self._prices(provider, model),
            input_chars=chars,
            output_tokens=out,
            chars_per_token=request.chars_per_token,
        )
        reply = await self._check.call(
            self._engine,
            CheckRequest(session_id=request.session_id, estimate_usd=estimate),
            timeout=10.0,
        )
        if not reply.allowed:
            raise FunctionError(
                "budget_exceeded",
                f"compaction refused by the budget: {reply.detail or reply.reason}",
            )

    async def _settle(self, request: CompactRequest, cost: float, *, record_id: str) -> None:
        if self._record is None:
            return
        await self._record.call(
            self._engine,
            RecordRequest(record_id=record_id, session_id=request.session_id, cost_usd=cost),
            timeout=10.0,
        )

    async def _prices(self, provider: str, model: str) -> Prices | None:
        try:
            info = await MODELS_GET.call(
                self._engine, GetRequest(provider=provider, model=model), timeout=5.0
            )
        except (EngineError, ValidationError):
            return None
        return info.prices


class _Plan:
    """What one compaction summarises."""

    def __init__(
        self,
        *,
        messages: list[AgentMessage],
        replaces: list[str],
        first_kept: str,
        previous_id: str | None,
        previous_summary: str,
        previous: list[AgentMessage],
        replaced_chars: int,
    ) -> None:
        self.messages = messages
        self.replaces = replaces
        self.first_kept = first_kept
        self.previous_id = previous_id
        self.previous_summary = previous_summary
        self.previous = previous
        self.replaced_chars = replaced_chars


def _plan(path: MessagesResponse, request: CompactRequest, *, keep_ratio: float) -> _Plan | str:
    """The entries to summarise, or why there are none."""
    entries = path.messages
    pinned = set(path.pinned) | set(request.pinned)  # the caller's carry whole too
    last = next(
        (i for i in range(len(entries) - 1, -1, -1) if entries[i].type == COMPACTION_TYPE), None
    )
    previous = None if last is None else compaction_details(entries[last].message)
    start, floor_ids = 0, 0
    if last is not None and previous is not None:
        ids = [e.entry_id for e in entries]
        start = (
            ids.index(previous.first_kept_entry_id) if previous.first_kept_entry_id in ids else last
        )
        floor_ids = last - start
    live = [e for i, e in enumerate(entries[start:], start) if i != last]
    messages = [e.message for e in live]
    sizes = [message_chars(m) for m in messages]
    cut = choose_cut(
        messages,
        sizes,
        floor=floor_ids,
        keep_last=request.keep_last,
        # Asked by a person: summarise all but the newest keep_last, whether or not it fits.
        keep_chars=0
        if request.reason == "manual"
        else int(request.target_tokens * keep_ratio * request.chars_per_token),
    )
    if cut is None:
        return (
            f"the newest {request.keep_last} entries are all there is to keep: nothing older to"
            " summarise"
        )
    replaced = [e for e in live[: cut.index] if e.entry_id not in pinned]
    previous_summary = ""
    if last is not None:
        previous_summary = text_of(entries[last].message.content).strip()
    return _Plan(
        messages=[e.message for e in replaced],
        replaces=[e.entry_id for e in replaced],
        first_kept=live[cut.index].entry_id,
        previous_id=None if last is None else entries[last].entry_id,
        previous_summary=previous_summary,
        previous=[] if last is None else [entries[last].message],
        replaced_chars=sum(sizes[: cut.index]),
    )


def _split_model(spec: str) -> tuple[str, str]:
    provider, _, model = spec.partition(":")
    if not provider or not model:
        raise ValueError(f"compactor.model must be PROVIDER:MODEL, got {spec!r}")
    return provider, model
